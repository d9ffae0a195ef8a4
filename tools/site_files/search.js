// The search page's script: the corpus searched by words as `wikitrace search` does
// (tools/find.py), from the numbers search-index.js holds (find.site_index): the same words,
// weights and scores, summed in the same order, so the same hits with the same scores. Plain
// DOM, so that it works from file://; node can require it (tests/test_search_score.py).
(function () {
  "use strict";
  var WORD = /[\p{L}\p{N}_]+/gu; // Python's \w, which search splits texts on
  var COMPOUND = /_[\p{L}\p{N}_]|[a-z][A-Z]/u;

  function withParts(text) {
    // search.rank.with_parts: a snake_case or camelCase name followed by its parts.
    return text.replace(WORD, function (name) {
      if (!COMPOUND.test(name)) return name;
      return name + " " + name.replace(/(?<=[a-z0-9])(?=[A-Z])/g, " ").replace(/_/g, " ");
    });
  }

  function queryWords(query, stops) {
    var found = withParts(query).toLowerCase().match(WORD) || [];
    return found.filter(function (word) {
      return Array.from(word).length >= 2 && stops.indexOf(word) < 0;
    });
  }

  function scored(index, stems, words, allowed) {
    // search.rank.Ranker.scored.
    if (!index.texts) return [];
    var weight = 0;
    var known = [];
    words.forEach(function (word) {
      var key = index.stemmed ? stems[word] : word;
      var entry = key === undefined ? undefined : index.words[key];
      if (entry === undefined) {
        weight += index.unknown;
      } else {
        weight += entry[0];
        known.push(entry);
      }
    });
    if (!known.length || weight <= 0) return [];
    var sums = new Float64Array(index.texts);
    known.forEach(function (entry) {
      var texts = entry[1];
      var scores = entry[2];
      for (var j = 0; j < texts.length; j += 1) sums[texts[j]] += scores[j];
    });
    var found = [];
    for (var i = 0; i < index.texts; i += 1) {
      if (sums[i] > 0 && allowed(i)) found.push([i, sums[i] / weight]);
    }
    return found.sort(function (a, b) { return b[1] - a[1]; });
  }

  function search(data, query, minScore, limit) {
    // tools/find.search with no task left out: each hit as [kind, id, page, title, task,
    // task type, outcome, score], best first.
    var least = minScore === undefined ? data.min_score : minScore;
    var most = limit === undefined ? data.limit : limit;
    var words = queryWords(query, data.stop_words);
    var hits = [];
    ["insights", "compilations", "tasks"].forEach(function (kind) {
      var part = data.kinds[kind];
      var allowed = function (i) { return part.entries[i] !== null; };
      scored(part.index, data.stems, words, allowed)
        .filter(function (hit) { return hit[1] >= least; })
        .slice(0, most)
        .forEach(function (hit) { hits.push([kind].concat(part.entries[hit[0]], [hit[1]])); });
    });
    return hits.sort(function (a, b) { return b[7] - a[7]; });
  }

  if (typeof module === "object" && module.exports) module.exports = { search: search };
  if (typeof document === "undefined") return;
  var input = document.getElementById("search");
  var data = window.WIKITRACE_SEARCH;
  if (!input || !data) return;
  var list = document.getElementById("hits");
  var none = document.getElementById("no-match");
  var show = function () {
    var hits = input.value.trim() ? search(data, input.value) : [];
    list.textContent = "";
    hits.forEach(function (hit) {
      var item = document.createElement("li");
      var link = document.createElement("a");
      link.href = hit[2];
      link.textContent = hit[1];
      var task = "task " + hit[4] + (hit[5] ? ", " + hit[5] : "");
      item.textContent = hit[7].toFixed(2) + " " + hit[0].replace(/s$/, "") + " ";
      item.appendChild(link);
      item.appendChild(document.createTextNode(" (" + task + ", " + hit[6] + "): " + hit[3]));
      list.appendChild(item);
    });
    none.classList.toggle("hidden", !(input.value.trim() && !hits.length));
  };
  var asked = new URLSearchParams(window.location.search).get("q");
  if (asked) input.value = asked;
  input.addEventListener("input", show);
  show();
})();
