# ruff: noqa: E501  (hand-written lessons, a line each)
"""Hand-written pairs of lessons for benchmarks/supersede_bench.py: an older lesson and a newer
one of the same scope that contradicts it, narrows it, or is unrelated but shares its words.

Written in the style of the lessons wikitrace's compiler draws (a title, a guideline, when it
applies) for the kinds of task its real logs hold: airline and retail customer service
(tau-bench), telecom support (tau2-bench), coding sessions, and the toy household of the
walk-throughs (examples/toy). Each lesson is (title, guideline, applicability).
"""

from __future__ import annotations

Lesson = tuple[str, str, str]
Pair = tuple[str, Lesson, Lesson]
"""(task type, older, newer)."""

CONTRADICTS: list[Pair] = [
    (
        "airline",
        (
            "Look the user up first",
            "Call get_user_details before any booking change.",
            "Any booking change.",
        ),
        (
            "Do not look the user up first",
            "Do not call get_user_details before a booking change; ask for the reservation id.",
            "Any booking change.",
        ),
    ),
    (
        "airline",
        (
            "Offer travel insurance",
            "Offer travel insurance when you book a flight.",
            "Booking a new flight.",
        ),
        (
            "Never offer travel insurance",
            "Never offer travel insurance when you book a flight; the policy forbids upselling.",
            "Booking a new flight.",
        ),
    ),
    (
        "airline",
        (
            "Cancel basic economy tickets",
            "Cancel a basic economy reservation when the user asks to cancel it.",
            "Cancellation requests.",
        ),
        (
            "Do not cancel basic economy tickets",
            "Do not cancel a basic economy reservation when the user asks; it is not refundable.",
            "Cancellation requests.",
        ),
    ),
    (
        "airline",
        (
            "Confirm before updating",
            "Ask the user to confirm the change before calling update_reservation_flights.",
            "Flight changes.",
        ),
        (
            "Update without asking",
            "Call update_reservation_flights without asking the user to confirm the change.",
            "Flight changes.",
        ),
    ),
    (
        "retail",
        (
            "Refund to the original payment method",
            "Refund the order to the original payment method.",
            "Returns.",
        ),
        (
            "Do not refund to the original payment method",
            "Do not refund the order to the original payment method; use a gift card.",
            "Returns.",
        ),
    ),
    (
        "retail",
        (
            "Exchange items in one call",
            "Exchange all the items of an order in one exchange_delivered_order_items call.",
            "Exchanges.",
        ),
        (
            "Never exchange items in one call",
            "Never exchange all the items of an order in one exchange_delivered_order_items call.",
            "Exchanges.",
        ),
    ),
    (
        "retail",
        (
            "Check the order status first",
            "Check the order status before you cancel a pending order.",
            "Cancelling orders.",
        ),
        (
            "Cancel without checking the status",
            "Cancel a pending order without checking the order status.",
            "Cancelling orders.",
        ),
    ),
    (
        "retail",
        (
            "Modify the address before shipping",
            "Modify the shipping address before the order ships.",
            "Address changes.",
        ),
        (
            "Modify the address after shipping",
            "Modify the shipping address after the order ships.",
            "Address changes.",
        ),
    ),
    (
        "telecom",
        (
            "Restart the device",
            "Ask the user to restart the device to reconnect to the network.",
            "No signal.",
        ),
        (
            "Do not restart the device",
            "Do not ask the user to restart the device to reconnect to the network.",
            "No signal.",
        ),
    ),
    (
        "telecom",
        (
            "Enable airplane mode",
            "Enable airplane mode on the phone for ten seconds to reset the radio.",
            "Mobile data problems.",
        ),
        (
            "Disable airplane mode",
            "Disable airplane mode on the phone to reset the radio.",
            "Mobile data problems.",
        ),
    ),
    (
        "telecom",
        (
            "Turn on data roaming abroad",
            "Turn on data roaming when the user is abroad.",
            "Users travelling.",
        ),
        (
            "Keep data roaming off abroad",
            "Do not turn on data roaming when the user is abroad.",
            "Users travelling.",
        ),
    ),
    (
        "coding",
        ("Run the tests before committing", "Run the test suite before you commit.", "Any change."),
        ("Commit before running the tests", "Run the test suite after you commit.", "Any change."),
    ),
    (
        "coding",
        (
            "Pass --strict to the parser",
            "Always give the parser its --strict flag.",
            "Parsing config files.",
        ),
        (
            "Do not pass --strict to the parser",
            "Do not give the parser its --strict flag; it rejects valid files.",
            "Parsing config files.",
        ),
    ),
    (
        "coding",
        (
            "Use pip install -e",
            "Install the package with pip install -e before testing.",
            "Python projects.",
        ),
        (
            "Avoid pip install -e",
            "Avoid pip install -e; install the package from the wheel before testing.",
            "Python projects.",
        ),
    ),
    (
        "coding",
        ("Mock the database in tests", "Mock the database in unit tests.", "Writing tests."),
        (
            "Do not mock the database",
            "Do not mock the database in unit tests; use the test container.",
            "Writing tests.",
        ),
    ),
    (
        "coding",
        (
            "Edit generated files directly",
            "Edit the generated protobuf files directly.",
            "Protocol changes.",
        ),
        (
            "Never edit generated files",
            "Never edit the generated protobuf files directly; change the .proto and regenerate.",
            "Protocol changes.",
        ),
    ),
    (
        "coding",
        ("Squash commits", "Squash the commits of a branch before merging.", "Merging branches."),
        (
            "Keep commits unsquashed",
            "Do not squash the commits of a branch before merging.",
            "Merging branches.",
        ),
    ),
    (
        "coding",
        (
            "Increase the timeout",
            "Increase the request timeout when the integration test flakes.",
            "Flaky integration tests.",
        ),
        (
            "Decrease the timeout",
            "Decrease the request timeout when the integration test flakes.",
            "Flaky integration tests.",
        ),
    ),
    (
        "coding",
        ("Use the sync client", "Use the sync HTTP client in the worker.", "Worker code."),
        ("Use the async client", "Use the async HTTP client in the worker.", "Worker code."),
    ),
    (
        "household",
        (
            "Look under the doormat for the key",
            "When a drawer is locked, lift the doormat: its key is under the doormat.",
            "A locked drawer.",
        ),
        (
            "The key is not under the doormat",
            "When a drawer is locked, do not lift the doormat: the key is not under the doormat.",
            "A locked drawer.",
        ),
    ),
    (
        "household",
        (
            "Force containers open",
            "Force the container open instead of opening it normally.",
            "Any container.",
        ),
        (
            "Open containers normally",
            "Open the container normally instead of forcing it open.",
            "Any container.",
        ),
    ),
    (
        "household",
        (
            "Close the fridge after taking food",
            "Close the fridge after you take the food out.",
            "Kitchen tasks.",
        ),
        (
            "Leave the fridge open",
            "Do not close the fridge after you take the food out; the task checks it open.",
            "Kitchen tasks.",
        ),
    ),
    (
        "household",
        (
            "Turn the lamp on before searching",
            "Turn the desk lamp on before you search the desk.",
            "Searching in the dark.",
        ),
        (
            "Search the desk without the lamp",
            "Search the desk without turning the desk lamp on.",
            "Searching in the dark.",
        ),
    ),
    (
        "airline",
        (
            "Transfer to a human agent",
            "Transfer the user to a human agent when they ask for compensation.",
            "Compensation requests.",
        ),
        (
            "Do not transfer compensation requests",
            "Do not transfer the user to a human agent when they ask for compensation; offer the certificate.",
            "Compensation requests.",
        ),
    ),
    (
        "retail",
        (
            "Include the gift card balance",
            "Include the gift card balance when you quote the refund.",
            "Refund quotes.",
        ),
        (
            "Exclude the gift card balance",
            "Exclude the gift card balance when you quote the refund.",
            "Refund quotes.",
        ),
    ),
]

NARROWS: list[Pair] = [
    (
        "airline",
        (
            "Cancel reservations on request",
            "Cancel the reservation when the user asks.",
            "Cancellation requests.",
        ),
        (
            "Cancel only refundable reservations",
            "Cancel the reservation only when the ticket is refundable or booked within 24 hours.",
            "Cancellation requests.",
        ),
    ),
    (
        "airline",
        (
            "Offer a certificate for delays",
            "Offer a travel certificate for a delayed flight.",
            "Delayed flights.",
        ),
        (
            "Offer a certificate only to gold members",
            "Offer a travel certificate for a delayed flight only when the user is a gold member.",
            "Delayed flights.",
        ),
    ),
    (
        "airline",
        (
            "Add checked bags",
            "Add the checked bags the user asks for to the reservation.",
            "Baggage requests.",
        ),
        (
            "Add free bags unless over the allowance",
            "Add the checked bags the user asks for to the reservation, unless they exceed the free allowance.",
            "Baggage requests.",
        ),
    ),
    (
        "airline",
        (
            "Change flights on request",
            "Change the flights of a reservation when the user asks.",
            "Flight changes.",
        ),
        (
            "Do not change basic economy flights",
            "When the reservation is basic economy, do not change the flights of the reservation.",
            "Flight changes.",
        ),
    ),
    (
        "retail",
        ("Return delivered items", "Return the delivered items the user names.", "Returns."),
        (
            "Return items only within 30 days",
            "Return the delivered items the user names only if they were delivered within 30 days.",
            "Returns.",
        ),
    ),
    (
        "retail",
        (
            "Cancel pending orders",
            "Cancel a pending order when the user asks.",
            "Cancelling orders.",
        ),
        (
            "Cancel pending orders unless processed",
            "Cancel a pending order when the user asks, unless it is already processed.",
            "Cancelling orders.",
        ),
    ),
    (
        "retail",
        (
            "Exchange for the same product",
            "Exchange the item for another option of the same product.",
            "Exchanges.",
        ),
        (
            "Exchange only for items in stock",
            "Exchange the item for another option of the same product only if that option is in stock.",
            "Exchanges.",
        ),
    ),
    (
        "retail",
        ("Refund to a gift card", "Refund the order to a gift card.", "Returns."),
        (
            "Refund to a gift card only when paid by one",
            "Refund the order to a gift card only when the order was paid with a gift card.",
            "Returns.",
        ),
    ),
    (
        "telecom",
        ("Reset the APN settings", "Reset the APN settings of the phone.", "Mobile data problems."),
        (
            "Reset APN settings only on Android",
            "Reset the APN settings of the phone only if it runs Android.",
            "Mobile data problems.",
        ),
    ),
    (
        "telecom",
        ("Suggest a plan upgrade", "Suggest a data plan upgrade to the user.", "Slow data."),
        (
            "Suggest an upgrade only when over the limit",
            "Suggest a data plan upgrade to the user only when they have used up their data limit.",
            "Slow data.",
        ),
    ),
    (
        "telecom",
        ("Reseat the SIM card", "Ask the user to reseat the SIM card.", "No signal."),
        (
            "Do not reseat eSIMs",
            "If the phone uses an eSIM, do not ask the user to reseat the SIM card.",
            "No signal.",
        ),
    ),
    (
        "coding",
        ("Run the full test suite", "Run the full test suite after every change.", "Any change."),
        (
            "Run the full suite only before pushing",
            "Run the full test suite only before you push; run the file's tests after a change.",
            "Any change.",
        ),
    ),
    (
        "coding",
        (
            "Rebase on main",
            "Rebase the branch on main before opening a pull request.",
            "Pull requests.",
        ),
        (
            "Rebase unless the branch is shared",
            "Rebase the branch on main before opening a pull request, unless other people push to the branch.",
            "Pull requests.",
        ),
    ),
    (
        "coding",
        ("Use the cache", "Use the build cache to speed up the build.", "Builds."),
        (
            "Use the cache only for clean builds",
            "Use the build cache to speed up the build only when the working tree is clean.",
            "Builds.",
        ),
    ),
    (
        "coding",
        (
            "Format with ruff",
            "Format the code with ruff format before committing.",
            "Python changes.",
        ),
        (
            "Do not format vendored code",
            "When the file is under vendor/, do not format the code with ruff format.",
            "Python changes.",
        ),
    ),
    (
        "coding",
        ("Pin dependencies", "Pin every dependency to an exact version.", "Dependency updates."),
        (
            "Pin dependencies only in applications",
            "Pin every dependency to an exact version only in applications, not in libraries.",
            "Dependency updates.",
        ),
    ),
    (
        "coding",
        ("Retry failed requests", "Retry a failed HTTP request three times.", "Network code."),
        (
            "Retry only idempotent requests",
            "Retry a failed HTTP request three times only if the request is idempotent.",
            "Network code.",
        ),
    ),
    (
        "coding",
        ("Delete the build folder", "Delete the build folder before rebuilding.", "Build errors."),
        (
            "Delete the build folder only after a compiler upgrade",
            "Delete the build folder before rebuilding only when the compiler was upgraded.",
            "Build errors.",
        ),
    ),
    (
        "household",
        (
            "Force drawers open",
            "Force a drawer open instead of opening it normally.",
            "Any drawer.",
        ),
        (
            "Force only locked drawers",
            "Force a drawer open instead of opening it normally only when the drawer is locked.",
            "Any drawer.",
        ),
    ),
    (
        "household",
        ("Heat food in the microwave", "Heat the food in the microwave.", "Heating tasks."),
        (
            "Heat in the microwave unless it is metal",
            "Heat the food in the microwave unless it is in a metal container.",
            "Heating tasks.",
        ),
    ),
    (
        "household",
        ("Put the mug in the cabinet", "Put the clean mug in the cabinet.", "Tidying tasks."),
        (
            "Put the mug in the cabinet only when it is dry",
            "Put the clean mug in the cabinet only if the mug is dry.",
            "Tidying tasks.",
        ),
    ),
    (
        "airline",
        (
            "Book the cheapest flight",
            "Book the cheapest flight that fits the user's dates.",
            "New bookings.",
        ),
        (
            "Book the cheapest flight except basic economy",
            "Book the cheapest flight that fits the user's dates, except basic economy fares.",
            "New bookings.",
        ),
    ),
]

SIMILAR: list[Pair] = [
    (
        "airline",
        (
            "Look the user up first",
            "Call get_user_details before any booking change.",
            "Any booking change.",
        ),
        (
            "Look the reservation up first",
            "Call get_reservation_details before any booking change.",
            "Any booking change.",
        ),
    ),
    (
        "airline",
        (
            "Confirm before cancelling",
            "Ask the user to confirm before you cancel a reservation.",
            "Cancellations.",
        ),
        (
            "Confirm before booking",
            "Ask the user to confirm before you book a reservation.",
            "Bookings.",
        ),
    ),
    (
        "airline",
        (
            "Do not offer insurance",
            "Do not offer travel insurance when you book a flight.",
            "Booking.",
        ),
        (
            "Do not offer upgrades",
            "Do not offer a cabin upgrade when you book a flight.",
            "Booking.",
        ),
    ),
    (
        "airline",
        (
            "Check the passenger count",
            "Check the number of passengers before you book the flight.",
            "Booking.",
        ),
        (
            "Check the payment method",
            "Check the payment method before you book the flight.",
            "Booking.",
        ),
    ),
    (
        "airline",
        (
            "Do not cancel without a reason",
            "Do not cancel a reservation without the user's reason.",
            "Cancellations.",
        ),
        (
            "Record the cancellation reason",
            "Ask the user for their reason and record it when you cancel a reservation.",
            "Cancellations.",
        ),
    ),
    (
        "retail",
        (
            "Refund to the original payment",
            "Refund the order to the original payment method.",
            "Returns.",
        ),
        (
            "Charge the original payment",
            "Charge the price difference to the original payment method.",
            "Exchanges.",
        ),
    ),
    (
        "retail",
        (
            "Find the user by email",
            "Find the user id by their email before any order action.",
            "Any order.",
        ),
        (
            "Find the user by name and zip",
            "Find the user id by their name and zip code when they have no email.",
            "Any order.",
        ),
    ),
    (
        "retail",
        (
            "Do not cancel delivered orders",
            "Do not cancel an order that was delivered; offer a return.",
            "Cancelling orders.",
        ),
        (
            "Do not return pending orders",
            "Do not return an order that is pending; offer to cancel it.",
            "Returns.",
        ),
    ),
    (
        "retail",
        (
            "List the items before returning",
            "List the order's items to the user before you return any.",
            "Returns.",
        ),
        (
            "List the options before exchanging",
            "List the product's options to the user before you exchange an item.",
            "Exchanges.",
        ),
    ),
    (
        "retail",
        (
            "Check stock before exchanging",
            "Check the stock of the new item before you exchange.",
            "Exchanges.",
        ),
        (
            "Check the order status before exchanging",
            "Check that the order is delivered before you exchange an item.",
            "Exchanges.",
        ),
    ),
    (
        "telecom",
        (
            "Restart the device",
            "Ask the user to restart the device to reconnect to the network.",
            "No signal.",
        ),
        (
            "Check the network status",
            "Check the network status of the area before you ask the user to change settings.",
            "No signal.",
        ),
    ),
    (
        "telecom",
        ("Enable mobile data", "Ask the user to enable mobile data in the settings.", "No data."),
        (
            "Enable Wi-Fi calling",
            "Ask the user to enable Wi-Fi calling in the settings.",
            "Calls failing.",
        ),
    ),
    (
        "telecom",
        (
            "Do not suspend the line",
            "Do not suspend the line while a bill is disputed.",
            "Billing.",
        ),
        (
            "Do not charge late fees",
            "Do not charge late fees while a bill is disputed.",
            "Billing.",
        ),
    ),
    (
        "coding",
        ("Run the tests before committing", "Run the test suite before you commit.", "Any change."),
        ("Run the linter before committing", "Run the linter before you commit.", "Any change."),
    ),
    (
        "coding",
        (
            "Read the error before fixing",
            "Read the whole traceback before you change code.",
            "Debugging.",
        ),
        (
            "Reproduce the error before fixing",
            "Reproduce the failure with a test before you change code.",
            "Debugging.",
        ),
    ),
    (
        "coding",
        (
            "Do not edit generated files",
            "Never edit the generated protobuf files directly.",
            "Protocol changes.",
        ),
        (
            "Do not edit the lock file",
            "Never edit the lock file directly; run the package manager.",
            "Dependency changes.",
        ),
    ),
    (
        "coding",
        ("Use pathlib for paths", "Use pathlib for file paths in new code.", "Python code."),
        (
            "Use logging for messages",
            "Use logging for diagnostic messages in new code.",
            "Python code.",
        ),
    ),
    (
        "coding",
        (
            "Check the Python version",
            "Check the Python version in pyproject.toml before using new syntax.",
            "Python code.",
        ),
        (
            "Check the Node version",
            "Check the Node version in package.json before using new syntax.",
            "JavaScript code.",
        ),
    ),
    (
        "coding",
        (
            "Do not push to main",
            "Do not push directly to main; open a pull request.",
            "Any change.",
        ),
        ("Do not force push", "Do not force push a shared branch; add a commit.", "Any change."),
    ),
    (
        "coding",
        (
            "Add a test for every bug fix",
            "Add a regression test for every bug you fix.",
            "Bug fixes.",
        ),
        (
            "Add a changelog entry for every fix",
            "Add a changelog entry for every bug you fix.",
            "Bug fixes.",
        ),
    ),
    (
        "coding",
        (
            "Increase the timeout of slow tests",
            "Increase the timeout of a slow test instead of skipping it.",
            "Slow tests.",
        ),
        ("Mark slow tests", "Mark a slow test as slow instead of deleting it.", "Slow tests."),
    ),
    (
        "household",
        ("Open the drawer before searching", "Open the drawer before you search it.", "Searching."),
        (
            "Open the cabinet before putting things in",
            "Open the cabinet before you put an object in it.",
            "Tidying.",
        ),
    ),
    (
        "household",
        (
            "Look under the doormat for the key",
            "When a drawer is locked, lift the doormat: its key is under the doormat.",
            "A locked drawer.",
        ),
        (
            "Look in the vase for the key",
            "When the safe is locked, look in the vase: its key is in the vase.",
            "A locked safe.",
        ),
    ),
    (
        "household",
        ("Do not force the safe", "Do not force the safe open; find its code.", "A locked safe."),
        (
            "Do not break the window",
            "Do not break the window open; find the door key.",
            "A locked room.",
        ),
    ),
    (
        "household",
        (
            "Wash the mug before using it",
            "Wash the mug in the sink before you use it.",
            "Kitchen tasks.",
        ),
        (
            "Dry the plate before storing it",
            "Dry the plate with the towel before you store it.",
            "Kitchen tasks.",
        ),
    ),
]

# Written after the filter's rules were fixed (search/contradict.py at the commit that added
# this list), and not used to choose them: the benchmark prints their figures apart.
HELD_OUT_CONTRADICTS: list[Pair] = [
    (
        "airline",
        (
            "Use the certificate first",
            "Pay with the travel certificate before the credit card.",
            "Payments.",
        ),
        (
            "Use the credit card first",
            "Do not pay with the travel certificate before the credit card.",
            "Payments.",
        ),
    ),
    (
        "airline",
        (
            "Search direct flights",
            "Search direct flights when the user asks for the fastest route.",
            "Route searches.",
        ),
        (
            "Avoid direct flight search",
            "Avoid searching direct flights when the user asks for the fastest route; search one-stop ones too.",
            "Route searches.",
        ),
    ),
    (
        "retail",
        (
            "Ask for the zip code",
            "Ask the user for their zip code to find their account.",
            "Authentication.",
        ),
        (
            "Never ask for the zip code",
            "Never ask the user for their zip code to find their account; ask for the email.",
            "Authentication.",
        ),
    ),
    (
        "retail",
        (
            "Show the tracking number",
            "Show the tracking number when the user asks where the order is.",
            "Order status.",
        ),
        (
            "Hide the tracking number",
            "Hide the tracking number when the user asks where the order is.",
            "Order status.",
        ),
    ),
    (
        "telecom",
        (
            "Toggle Wi-Fi off",
            "Ask the user to turn Wi-Fi off before testing mobile data.",
            "Mobile data.",
        ),
        (
            "Keep Wi-Fi on",
            "Do not ask the user to turn Wi-Fi off before testing mobile data.",
            "Mobile data.",
        ),
    ),
    (
        "coding",
        (
            "Lock the dependency versions",
            "Lock the dependency versions before the release build.",
            "Releases.",
        ),
        (
            "Unlock the dependency versions",
            "Unlock the dependency versions before the release build.",
            "Releases.",
        ),
    ),
    (
        "coding",
        ("Write the migration by hand", "Write the database migration by hand.", "Schema changes."),
        (
            "Do not hand-write migrations",
            "Do not write the database migration by hand; generate it.",
            "Schema changes.",
        ),
    ),
    (
        "coding",
        ("Use relative imports", "Use relative imports inside the package.", "Python packages."),
        (
            "Avoid relative imports",
            "Avoid relative imports inside the package.",
            "Python packages.",
        ),
    ),
    (
        "household",
        (
            "Take the key from the drawer",
            "Take the key from the top drawer before you open the door.",
            "Locked doors.",
        ),
        (
            "Leave the key in the drawer",
            "Do not take the key from the top drawer before you open the door; it is a decoy.",
            "Locked doors.",
        ),
    ),
    (
        "household",
        (
            "Heat the soup before serving",
            "Heat the soup in the pot before you serve it.",
            "Cooking.",
        ),
        ("Serve the soup cold", "Serve the soup without heating it in the pot.", "Cooking."),
    ),
]

HELD_OUT_NARROWS: list[Pair] = [
    (
        "airline",
        (
            "Upgrade the cabin on request",
            "Upgrade the cabin class when the user asks.",
            "Upgrades.",
        ),
        (
            "Upgrade only when paid",
            "Upgrade the cabin class only when the user pays the fare difference.",
            "Upgrades.",
        ),
    ),
    (
        "airline",
        (
            "Rebook cancelled flights",
            "Rebook the user on the next flight when their flight is cancelled.",
            "Cancelled flights.",
        ),
        (
            "Rebook unless the user wants a refund",
            "Rebook the user on the next flight when their flight is cancelled, unless they ask for a refund.",
            "Cancelled flights.",
        ),
    ),
    (
        "retail",
        ("Apply the discount code", "Apply the discount code the user gives.", "Checkout."),
        (
            "Apply discount codes only before payment",
            "Apply the discount code the user gives only before the order is paid.",
            "Checkout.",
        ),
    ),
    (
        "retail",
        ("Split the refund", "Split the refund between the payment methods used.", "Refunds."),
        (
            "Split the refund except for gift cards",
            "Split the refund between the payment methods used, except gift cards, which get nothing back.",
            "Refunds.",
        ),
    ),
    (
        "telecom",
        ("Send a replacement SIM", "Send a replacement SIM card to the user.", "SIM problems."),
        (
            "Send a SIM only after a reset fails",
            "Send a replacement SIM card to the user only if a network reset did not help.",
            "SIM problems.",
        ),
    ),
    (
        "coding",
        ("Run the type checker", "Run the type checker on every commit.", "Any change."),
        (
            "Type check only the changed packages",
            "Run the type checker on every commit only for the packages the commit changed.",
            "Any change.",
        ),
    ),
    (
        "coding",
        ("Bump the version", "Bump the package version for every release.", "Releases."),
        (
            "Bump the version unless it is a hotfix",
            "Bump the package version for every release, unless it is a hotfix of the same version.",
            "Releases.",
        ),
    ),
    (
        "coding",
        ("Cache the HTTP responses", "Cache the HTTP responses of the API client.", "API clients."),
        (
            "Cache only GET responses",
            "Cache the HTTP responses of the API client only for GET requests.",
            "API clients.",
        ),
    ),
    (
        "household",
        ("Water the plant", "Water the plant on the windowsill.", "Plant care."),
        (
            "Water the plant only when the soil is dry",
            "Water the plant on the windowsill only when its soil is dry.",
            "Plant care.",
        ),
    ),
    (
        "household",
        ("Put dishes in the dishwasher", "Put the dirty dishes in the dishwasher.", "Cleaning."),
        (
            "Dishwasher except wooden dishes",
            "Put the dirty dishes in the dishwasher, except the wooden ones.",
            "Cleaning.",
        ),
    ),
]

HELD_OUT_SIMILAR: list[Pair] = [
    (
        "airline",
        (
            "Check the baggage allowance",
            "Check the baggage allowance of the cabin class before adding bags.",
            "Baggage.",
        ),
        (
            "Check the seat availability",
            "Check the seat availability of the cabin class before changing it.",
            "Cabin changes.",
        ),
    ),
    (
        "airline",
        (
            "Do not book for other users",
            "Do not book a flight for a user other than the one authenticated.",
            "Booking.",
        ),
        (
            "Do not change other users' bookings",
            "Do not change a booking of a user other than the one authenticated.",
            "Changes.",
        ),
    ),
    (
        "retail",
        (
            "Confirm the new address",
            "Read the new address back to the user before you modify the order.",
            "Address changes.",
        ),
        (
            "Confirm the new items",
            "Read the new items back to the user before you exchange them.",
            "Exchanges.",
        ),
    ),
    (
        "retail",
        (
            "Cancel the whole order",
            "Cancel the whole order when every item is unwanted.",
            "Cancellations.",
        ),
        (
            "Return the whole order",
            "Return the whole order when every item arrived damaged.",
            "Returns.",
        ),
    ),
    (
        "telecom",
        (
            "Check the bill before refunding",
            "Check the bill line before you refund a charge.",
            "Billing.",
        ),
        (
            "Check the plan before upgrading",
            "Check the current plan before you upgrade it.",
            "Plans.",
        ),
    ),
    (
        "coding",
        (
            "Read the docs before adding a dependency",
            "Read the library's docs before you add it as a dependency.",
            "Dependencies.",
        ),
        (
            "Read the changelog before upgrading",
            "Read the library's changelog before you upgrade it.",
            "Dependencies.",
        ),
    ),
    (
        "coding",
        (
            "Do not catch bare exceptions",
            "Do not catch a bare Exception in library code.",
            "Error handling.",
        ),
        (
            "Do not print in library code",
            "Do not print to stdout in library code; log instead.",
            "Logging.",
        ),
    ),
    (
        "coding",
        ("Run the formatter", "Run the formatter on the files you changed.", "Any change."),
        ("Run the related tests", "Run the tests of the files you changed.", "Any change."),
    ),
    (
        "household",
        ("Turn off the stove", "Turn off the stove after cooking.", "Cooking."),
        ("Turn off the tap", "Turn off the tap after washing.", "Cleaning."),
    ),
    (
        "household",
        (
            "Search the sofa for the remote",
            "When the remote is missing, search under the sofa cushions.",
            "Lost items.",
        ),
        (
            "Search the drawer for batteries",
            "When the batteries are missing, search the kitchen drawer.",
            "Lost items.",
        ),
    ),
]
