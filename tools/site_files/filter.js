// Filter the rows of a table by the words typed: plain DOM, so it works from file://.
(function () {
  var input = document.getElementById("filter");
  if (!input) return;
  var rows = Array.prototype.slice.call(document.querySelectorAll(input.dataset.rows));
  var count = document.getElementById("filter-count");
  function apply() {
    var words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
    var shown = 0;
    rows.forEach(function (row) {
      var text = row.textContent.toLowerCase();
      var keep = words.every(function (word) { return text.indexOf(word) !== -1; });
      row.classList.toggle("hidden", !keep);
      if (keep) shown += 1;
    });
    document.querySelectorAll("section.group").forEach(function (section) {
      section.classList.toggle("hidden", !section.querySelector("tr.row:not(.hidden)"));
    });
    count.textContent = words.length ? shown + " of " + rows.length + " shown" : "";
  }
  input.addEventListener("input", apply);
  apply();
})();
