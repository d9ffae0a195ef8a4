// The site's one script, plain DOM so that it works from file://: the filter of a table's rows
// by whole words (the lessons' search box fills it from ?q=), and folded turns opened by their
// #anchor.
(function () {
  function words(text) {
    // Whole words: "task 5" keeps "Task 5" and not "Task 51"; snake_case names split too.
    return text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);
  }
  var input = document.getElementById("filter");
  if (input) {
    var rows = Array.prototype.slice.call(document.querySelectorAll(input.dataset.rows));
    var known = rows.map(function (row) {
      var seen = Object.create(null);
      words(row.textContent).forEach(function (word) { seen[word] = true; });
      return seen;
    });
    var count = document.getElementById("filter-count");
    var apply = function () {
      var wanted = words(input.value);
      var shown = 0;
      rows.forEach(function (row, index) {
        var keep = wanted.every(function (word) { return known[index][word] === true; });
        row.classList.toggle("hidden", !keep);
        if (keep) shown += 1;
      });
      document.querySelectorAll("section.group").forEach(function (section) {
        section.classList.toggle("hidden", !section.querySelector("tr.row:not(.hidden)"));
      });
      count.textContent = wanted.length ? shown + " of " + rows.length + " shown" : "";
    };
    var asked = new URLSearchParams(window.location.search).get("q");
    if (asked) input.value = asked;
    input.addEventListener("input", apply);
    apply();
  }
  function openTarget() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (!target) return;
    for (var node = target; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    target.scrollIntoView();
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  var unfold = document.getElementById("unfold");
  if (unfold) {
    unfold.addEventListener("click", function () {
      document.querySelectorAll("details.turn").forEach(function (turn) { turn.open = true; });
    });
  }
})();
