"""A search benchmark small enough to build in seconds: the runs of the two sample logs in
examples/ and tests/data, compiled by a fake model that answers, for each task, with a
compilation and a lesson written from what its run did (the tools it called, what went
wrong), and plain-language queries, each with the tasks whose lesson or compilation it should
find. Used by tests/test_search.py and benchmarks/search_bench.py."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from wikitrace.compiler import BuildOptions, build_corpus
from wikitrace.search import MIN_SCORE
from wikitrace.tools.find import SearchKind
from wikitrace.tools.memory import Memory

from helpers import FakeLLM, good_answer

ROOT = Path(__file__).resolve().parent.parent
LOGS = [
    ROOT / "examples" / "tau-bench-airline.jsonl",
    ROOT / "tests/data/tau2-telecom-20runs.jsonl",
]
TOP = 5

_MOBILE, _SERVICE, _MMS = "[mobile_data_issue]", "[service_issue]", "[mms_issue]"

WRITTEN: dict[str, tuple[str, str, str, str, str]] = {
    # task id: compilation title, its claim, lesson title, guideline, applicability
    "0": (
        "Booked with a payment split that did not match the total",
        "book_reservation was refused: the payment amount does not add up to the total price.",
        "Sum the payment methods before book_reservation",
        "Use calculate to add the certificate, gift card and credit card amounts and compare "
        "them with the fare total before calling book_reservation.",
        "Booking a one-way trip paid with several payment methods.",
    ),
    "1": (
        "Never looked up the user's reservations",
        "The agent answered without calling get_user_details or get_reservation_details.",
        "Call get_user_details before saying a trip is not on file",
        "Look up the user_id's reservations with get_user_details, then read each with "
        "get_reservation_details, before telling the user their trip cannot be found.",
        "The user says a trip is in their reservations but gives no reservation id.",
    ),
    "2": (
        "Changed only one of the business reservations",
        "update_reservation_flights set cabin economy on one reservation and missed the others.",
        "Downgrade every businessClass reservation, not just the first",
        "List all reservations with get_user_details and call update_reservation_flights with "
        "cabin economy on each one in business; the price difference goes back to the user.",
        "A user wants every business cabin booking moved to economy without changing flights.",
    ),
    "5": (
        "Skipped the bags and passenger change",
        "The agent called update_reservation_flights but not update_reservation_baggages.",
        "Use update_reservation_baggages and update_reservation_passengers",
        "Add checked bags with update_reservation_baggages and replace the traveller with "
        "update_reservation_passengers, after confirming each change with the user.",
        "A reservation needs extra luggage and a different passenger name.",
    ),
    "7": (
        "Picked a flight without comparing prices",
        "search_onestop_flight results were not compared; a pricier fare was booked.",
        "Compare search_onestop_flight fares before choosing",
        "For the cheapest economy option on the next day, list search_direct_flight and "
        "search_onestop_flight results and pick the lowest fare.",
        "Rebooking to the least expensive flight on a later date.",
    ),
    "12": (
        "Cancelled after confirming, refund issued",
        "cancel_reservation ran after the user confirmed, and the refund went to the original "
        "payment.",
        "Confirm, then cancel_reservation for a refund",
        "Read the reservation with get_reservation_details, confirm the cancellation with the "
        "user, then call cancel_reservation; the refund goes to the original payment method.",
        "A user insists on cancelling a booking and getting their money back.",
    ),
    _MOBILE + "user_abroad_roaming_enabled_off[PERSONA:None]": (
        "Reset the APN abroad instead of the phone's roaming switch",
        "enable_roaming on the line did not help; reset_apn_settings and reboot_device neither.",
        "Abroad: enable_roaming on the line and on the device",
        "When the customer is travelling outside the country, call enable_roaming for the line "
        "and ask them to switch on data roaming in the phone's settings.",
        "Mobile data stops while the user is overseas.",
    ),
    _MOBILE + "user_abroad_roaming_disabled_on[PERSONA:Easy]": (
        "Refuelled data that was not the problem",
        "refuel_data and toggle_data were tried before roaming was checked.",
        "Check roaming before refuel_data",
        "Ask whether the user is abroad and check the roaming setting before selling a data "
        "top-up with refuel_data.",
        "Slow mobile data for a user who may be roaming.",
    ),
    _MOBILE + "user_abroad_roaming_disabled_off[PERSONA:Hard]": (
        "Gave up to a human agent too early",
        "The agent called transfer_to_human_agents after one speed test and a VPN check.",
        "Try the device fixes before transfer_to_human_agents",
        "Do not call transfer_to_human_agents until roaming, mobile data and the network mode "
        "have been checked on the device.",
        "A hard persona pushes for escalation while data is still broken.",
    ),
    _MOBILE + "data_mode_off[PERSONA:None]": (
        "Mobile data was simply switched off",
        "check_network_status showed data disabled; toggle_data fixed it.",
        "Check whether mobile data is on with toggle_data",
        "Before deeper troubleshooting, check_network_status and have the user turn mobile "
        "data back on with toggle_data, then run_speed_test.",
        "No mobile data at all on an otherwise working line.",
    ),
    _MOBILE + "data_saver_mode_on[PERSONA:Easy]": (
        "Data Saver throttled the connection",
        "check_data_restriction_status showed Data Saver on; toggle_data_saver_mode fixed speed.",
        "Turn off Data Saver with toggle_data_saver_mode",
        "When check_data_restriction_status reports a restriction, have the user switch Data "
        "Saver off with toggle_data_saver_mode and test the speed again.",
        "Data works but is very slow.",
    ),
    _MOBILE + "bad_network_preference[PERSONA:Hard]": (
        "The network mode was set to 2G only",
        "check_status_bar showed 2G; set_network_mode_preference to 4G/5G restored speed.",
        "Set the network mode preference to 4G/5G",
        "If the status bar shows 2G or 3G, call set_network_mode_preference with a 4G/5G "
        "preferred mode.",
        "Slow data and an old network generation in the status bar.",
    ),
    _MOBILE + "bad_vpn[PERSONA:None]": (
        "A VPN slowed the data",
        "check_vpn_status showed a VPN connected; disconnect_vpn fixed the speed test.",
        "Check for a VPN with check_vpn_status",
        "A connected VPN can make data slow: check_vpn_status and disconnect_vpn before "
        "resetting anything.",
        "Speed tests come back poor on mobile data.",
    ),
    _MOBILE + "data_usage_exceeded[PERSONA:Easy]": (
        "Never noticed the plan's data allowance was used up",
        "get_data_usage showed the limit reached, yet the agent reset the APN and rebooted.",
        "Offer refuel_data when get_data_usage shows the limit reached",
        "Compare get_data_usage with the plan limit first; when it is exceeded, offer a "
        "refuel_data top-up instead of device resets.",
        "Data stops working near the end of the billing cycle.",
    ),
    _SERVICE + "airplane_mode_on[PERSONA:None]": (
        "Airplane mode was on",
        "check_status_bar showed the airplane icon; toggle_airplane_mode restored service.",
        "No Service: check_status_bar for airplane mode",
        "Read the status bar with check_status_bar; if airplane mode is on, call "
        "toggle_airplane_mode.",
        "The phone shows No Service.",
    ),
    _SERVICE + "unseat_sim_card[PERSONA:Easy]": (
        "The SIM card was not seated",
        "check_sim_status reported no SIM; reseat_sim_card brought the signal back.",
        "Reseat the SIM with reseat_sim_card",
        "When check_sim_status finds no SIM, ask the user to take the card out and put it "
        "back with reseat_sim_card.",
        "No Service and the phone does not detect its SIM.",
    ),
    _SERVICE + "lock_sim_card_pin[PERSONA:Hard]": (
        "Did not identify the customer or the locked SIM",
        "The agent never called get_customer_by_phone and missed the PIN-locked SIM.",
        "Identify the customer with get_customer_by_phone first",
        "Start with get_customer_by_phone and get_details_by_id; a SIM locked by its PIN needs "
        "the PUK from the account, which only the line's details give.",
        "No Service with a SIM that asks for a PIN.",
    ),
    _SERVICE + "break_apn_settings[PERSONA:None]": (
        "Broken APN settings, reset and rebooted",
        "check_apn_settings showed a wrong APN; reset_apn_settings then reboot_device fixed it.",
        "Reset APN settings, then reboot_device",
        "When check_apn_settings shows values that differ from the defaults, call "
        "reset_apn_settings and have the user restart the phone with reboot_device.",
        "No Service though the SIM and airplane mode are fine.",
    ),
    _SERVICE + "overdue_bill_suspension[PERSONA:Easy]": (
        "The line was suspended for an unpaid bill",
        "get_bills_for_customer showed an overdue bill; make_payment and resume_line came late.",
        "Check get_bills_for_customer when a line is suspended",
        "A suspended line often has an overdue bill: get_bills_for_customer, "
        "send_payment_request, make_payment, then resume_line.",
        "No Service on a line whose status is suspended.",
    ),
    _SERVICE + "contract_end_suspension[PERSONA:Hard]": (
        "A contract that ended cannot be resumed by the agent",
        "The line was suspended because its contract ended; transfer_to_human_agents was right.",
        "A contract-end suspension goes to transfer_to_human_agents",
        "When the line is suspended because its contract ended, resume_line is not allowed: "
        "hand over with transfer_to_human_agents.",
        "A suspended line whose contract end date has passed.",
    ),
    _MMS + "bad_network_preference[PERSONA:None]": (
        "MMS failed on a 2G-only network mode",
        "can_send_mms failed until set_network_mode_preference allowed 4G.",
        "MMS needs more than 2G: set_network_mode_preference",
        "Picture messages need a data network: check the network mode and call "
        "set_network_mode_preference with 4G/5G preferred.",
        "The user cannot send MMS.",
    ),
    _MMS + "bad_wifi_calling[PERSONA:Easy]": (
        "Wi-Fi Calling blocked MMS",
        "check_wifi_calling_status showed it on; toggle_wifi_calling let can_send_mms pass.",
        "Turn off Wi-Fi Calling with toggle_wifi_calling",
        "If check_wifi_calling_status shows Wi-Fi Calling on, switch it off with "
        "toggle_wifi_calling and retry can_send_mms.",
        "MMS fails while connected to Wi-Fi.",
    ),
    _MMS + "break_apn_mms_setting[PERSONA:Hard]": (
        "The APN's MMSC URL was missing",
        "check_apn_settings showed no mmsc_url; reset_apn_settings and reboot_device fixed MMS.",
        "A missing MMSC URL: reset_apn_settings",
        "When check_apn_settings shows an empty mmsc_url, call reset_apn_settings and "
        "reboot_device.",
        "MMS fails and the APN settings look incomplete.",
    ),
    _MMS + "break_app_sms_permission[PERSONA:None]": (
        "The messaging app lacked the SMS permission",
        "check_app_permissions showed sms denied; grant_app_permission fixed it.",
        "Grant the messaging app its sms permission",
        "Check the messaging app with check_app_permissions and grant_app_permission for "
        "sms when it is missing.",
        "MMS fails in the default messaging app.",
    ),
    _MMS + "break_app_storage_permission[PERSONA:Easy]": (
        "The messaging app lacked the storage permission",
        "check_app_permissions showed storage denied; grant_app_permission fixed it.",
        "Grant the messaging app its storage permission",
        "Attachments need storage access: check_app_permissions, then grant_app_permission "
        "for storage.",
        "Picture messages cannot be attached or sent.",
    ),
    _MMS + "break_app_both_permissions[PERSONA:Hard]": (
        "Both of the messaging app's permissions were missing",
        "check_app_permissions showed sms and storage denied; grant_app_permission twice.",
        "Grant both sms and storage to the messaging app",
        "Look at every permission check_app_permissions lists and call grant_app_permission "
        "for each one missing, then retry can_send_mms.",
        "MMS still fails after one permission was granted.",
    ),
}


@dataclass(frozen=True)
class Query:
    text: str
    kind: SearchKind
    tasks: tuple[str, ...]
    """The tasks whose entry (any of their runs') is a right answer."""


QUERIES = [
    Query(
        "transfer to human",
        "insights",
        (
            _MOBILE + "user_abroad_roaming_disabled_off[PERSONA:Hard]",
            _SERVICE + "contract_end_suspension[PERSONA:Hard]",
        ),
    ),
    Query(
        "escalate too early to a human agent",
        "insights",
        (_MOBILE + "user_abroad_roaming_disabled_off[PERSONA:Hard]",),
    ),
    Query(
        "phone says no service and the plane icon is showing",
        "insights",
        (_SERVICE + "airplane_mode_on[PERSONA:None]",),
    ),
    Query(
        "sim card not detected, take it out and put it back",
        "insights",
        (_SERVICE + "unseat_sim_card[PERSONA:Easy]",),
    ),
    Query(
        "customer travelling overseas has no data",
        "insights",
        (_MOBILE + "user_abroad_roaming_enabled_off[PERSONA:None]",),
    ),
    Query("disconnecting a vpn", "insights", (_MOBILE + "bad_vpn[PERSONA:None]",)),
    Query(
        "data saver restricting speed", "insights", (_MOBILE + "data_saver_mode_on[PERSONA:Easy]",)
    ),
    Query(
        "pay the overdue bills and resume a suspended line",
        "insights",
        (_SERVICE + "overdue_bill_suspension[PERSONA:Easy]",),
    ),
    Query(
        "wifi calling stops picture messages",
        "insights",
        (_MMS + "bad_wifi_calling[PERSONA:Easy]",),
    ),
    Query(
        "granting sms permissions",
        "insights",
        (
            _MMS + "break_app_sms_permission[PERSONA:None]",
            _MMS + "break_app_both_permissions[PERSONA:Hard]",
        ),
    ),
    Query("payments that do not add up to the total", "insights", ("0",)),
    Query("downgrade business class bookings to economy", "insights", ("2",)),
    Query("cancelled reservations refunded", "insights", ("12",)),
    Query("user details lookup", "insights", ("1",)),
    Query("adding a checked bag", "insights", ("5",)),
    Query("one stop flights compared by fare", "insights", ("7",)),
    Query(
        "topping up data after the allowance ran out",
        "insights",
        (_MOBILE + "data_usage_exceeded[PERSONA:Easy]",),
    ),
    Query("data usage exceeded", "compilations", (_MOBILE + "data_usage_exceeded[PERSONA:Easy]",)),
    Query(
        "resetting apn and rebooting",
        "compilations",
        (
            _SERVICE + "break_apn_settings[PERSONA:None]",
            _MMS + "break_apn_mms_setting[PERSONA:Hard]",
        ),
    ),
    Query("sim locked by a pin", "compilations", (_SERVICE + "lock_sim_card_pin[PERSONA:Hard]",)),
    Query(
        "refuelled data",
        "compilations",
        (_MOBILE + "user_abroad_roaming_disabled_on[PERSONA:Easy]",),
    ),
    Query(
        "contract ended suspension",
        "compilations",
        (_SERVICE + "contract_end_suspension[PERSONA:Hard]",),
    ),
    Query("never looked up reservations", "compilations", ("1",)),
    Query("cancelling flights for a refund", "tasks", ("12",)),
]


def _answer(messages: list[dict[str, str]]) -> str:
    prompt = messages[0]["content"]
    data = json.loads(good_answer(prompt))
    task_id = prompt.split("TASK ID: ", 1)[1].split("\n", 1)[0]
    title, claim, lesson, guideline, applicability = WRITTEN[task_id]
    data["title"] = title
    data["claims"][0]["statement"] = claim
    data["insights"][0].update(title=lesson, guideline=guideline, applicability=applicability)
    return json.dumps(data)


def build(corpus: Path) -> Path:
    """The benchmark's corpus at `corpus` (32 runs, a lesson each), built in about a second."""
    llm = FakeLLM(answer=_answer)
    options = BuildOptions(inputs=LOGS, output=corpus, model=llm.model, use_cache=False)
    build_corpus(options, llm=llm)
    return corpus


def ranks(memory: Memory, min_score: float = MIN_SCORE) -> list[int | None]:
    """For each query, the place (1 = first) of its first right hit among the top TOP that
    score at least `min_score`."""
    found: list[int | None] = []
    for query in QUERIES:
        hits = memory.search(query.text, [query.kind], limit=TOP, min_score=min_score)
        places = [n for n, hit in enumerate(hits, start=1) if hit.task_id in query.tasks]
        found.append(places[0] if places else None)
    return found


def recall(memory: Memory) -> float:
    """The share of the queries whose right entry is among the top TOP hits."""
    placed = ranks(memory)
    return sum(place is not None for place in placed) / len(placed)
