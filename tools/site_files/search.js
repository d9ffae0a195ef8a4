// The search page's script: the corpus searched by words as `wikitrace search` does
// (tools/find.py), from the numbers search-index.js holds (tools/find.py, site_index): the same words,
// weights and scores, summed in the same order, so the same hits with the same scores. Plain
// DOM, so that it works from file://; node can require it (tests/test_search_score.py).
(function () {
  "use strict";
  var WORD = /[\p{L}\p{N}_]+/gu; // Python's \w, which search splits texts on
  var COMPOUND = /_[\p{L}\p{N}_]|[a-z][A-Z]/u;

  // The English Snowball stemmer (Porter2) as PyStemmer 3 stems (tests/test_search_score.py
  // compares them on every word of a corpus and the algorithm's hard cases).
  var SPECIAL = {
    skis: "ski", skies: "sky", idly: "idl", gently: "gentl", ugly: "ugli", early: "earli",
    only: "onli", singly: "singl", sky: "sky", news: "news", howe: "howe", atlas: "atlas",
    cosmos: "cosmos", bias: "bias", andes: "andes",
  };
  var AFTER_1A = [
    "inning", "outing", "canning", "herring", "earring", "proceed", "exceed", "succeed", "evening",
  ];
  var PREFIXES = [
    "gener", "commun", "arsen", "past", "univers", "later", "emerg", "organ", "inter",
  ];
  function vowel(c) { return "aeiouy".indexOf(c) >= 0; }
  function region(w, from) {
    for (var i = from; i < w.length - 1; i += 1) if (vowel(w[i]) && !vowel(w[i + 1])) return i + 2;
    return w.length;
  }
  function shortEnd(w) {
    var n = w.length;
    var last = w[n - 1];
    if (n >= 3 && !vowel(w[n - 3]) && vowel(w[n - 2]) && !vowel(last) && "wxY".indexOf(last) < 0) {
      return true;
    }
    if (n === 2 && vowel(w[0]) && !vowel(w[1])) return true;
    return w.endsWith("past");
  }
  function ending(w, suffixes) {
    for (var i = 0; i < suffixes.length; i += 1) if (w.endsWith(suffixes[i])) return suffixes[i];
    return null;
  }
  var STEP2 = [
    ["ization", "ize"], ["ational", "ate"], ["fulness", "ful"], ["ousness", "ous"],
    ["iveness", "ive"], ["ogist", "og"],
    ["tional", "tion"], ["biliti", "ble"], ["lessli", "less"], ["entli", "ent"], ["ation", "ate"],
    ["alism", "al"], ["aliti", "al"], ["ousli", "ous"], ["iviti", "ive"], ["fulli", "ful"],
    ["enci", "ence"], ["anci", "ance"], ["abli", "able"], ["izer", "ize"], ["ator", "ate"],
    ["alli", "al"], ["bli", "ble"], ["ogi", "og"], ["li", ""],
  ];
  var STEP3 = [
    ["ational", "ate"], ["tional", "tion"], ["alize", "al"], ["icate", "ic"], ["iciti", "ic"],
    ["ative", ""], ["ical", "ic"], ["ness", ""], ["ful", ""],
  ];
  var STEP4 = ["ement", "ance", "ence", "able", "ible", "ment", "ant", "ent", "ism", "ate", "iti",
    "ous", "ive", "ize", "ion", "al", "er", "ic"];
  function stem(word) {
    // PyStemmer's English Snowball stemmer, which search stems words with (search.rank).
    var w = word;
    if (w.length <= 2) return w;
    if (w[0] === "'") w = w.slice(1);
    if (Object.prototype.hasOwnProperty.call(SPECIAL, w)) return SPECIAL[w];
    var chars = w.split("");
    for (var i = 0; i < chars.length; i += 1) {
      if (chars[i] === "y" && (i === 0 || vowel(chars[i - 1]))) chars[i] = "Y";
    }
    w = chars.join("");
    var r1 = w.length;
    var prefix = PREFIXES.find(function (p) { return w.startsWith(p); });
    r1 = prefix ? prefix.length : region(w, 0);
    var r2 = region(w, r1);
    var s = ending(w, ["'s'", "'s", "'"]);
    if (s) w = w.slice(0, -s.length);
    s = ending(w, ["sses", "ied", "ies", "ss", "us", "s"]);
    if (s === "sses") w = w.slice(0, -2);
    else if (s === "ied" || s === "ies") w = w.slice(0, -3) + (w.length > 4 ? "i" : "ie");
    else if (s === "s" && /[aeiouy]/.test(w.slice(0, -2))) w = w.slice(0, -1);
    if (AFTER_1A.indexOf(w) >= 0) return w.replace(/Y/g, "y");
    s = ending(w, ["eedly", "ingly", "edly", "eed", "ing", "ed"]);
    if (s === "eed" || s === "eedly") {
      if (w.length - s.length >= r1) w = w.slice(0, -s.length) + "ee";
    } else if (s === "ing" && /^[^aeiouy]y$/.test(w.slice(0, -3))) {
      w = w[0] + "ie"; // dying, lying, vying
    } else if (s && /[aeiouy]/.test(w.slice(0, -s.length))) {
      w = w.slice(0, -s.length);
      if (ending(w, ["at", "bl", "iz"])) w += "e";
      else if (/(bb|dd|ff|gg|mm|nn|pp|rr|tt)$/.test(w)) {
        if (!/^[aeo](bb|dd|ff|gg|mm|nn|pp|rr|tt)$/.test(w)) w = w.slice(0, -1);
      } else if (r1 >= w.length && shortEnd(w)) w += "e";
    }
    if (w.length > 2 && /[yY]$/.test(w) && !vowel(w[w.length - 2])) w = w.slice(0, -1) + "i";
    var pair = STEP2.find(function (p) { return w.endsWith(p[0]); });
    if (pair && w.length - pair[0].length >= r1) {
      var before = w.slice(0, -pair[0].length);
      var li = /[cdeghkmnrt]$/.test(before);
      if (pair[0] === "ogi" ? before.endsWith("l") : pair[0] === "li" ? li : true) {
        w = before + pair[1];
      }
    }
    pair = STEP3.find(function (p) { return w.endsWith(p[0]); });
    if (pair && w.length - pair[0].length >= r1) {
      if (pair[0] !== "ative" || w.length - 5 >= r2) w = w.slice(0, -pair[0].length) + pair[1];
    }
    s = ending(w, STEP4);
    if (s && w.length - s.length >= r2) {
      if (s !== "ion" || /[st]$/.test(w.slice(0, -3))) w = w.slice(0, -s.length);
    }
    if (w.endsWith("e")) {
      var stemmed = w.slice(0, -1);
      if (w.length - 1 >= r2 || (w.length - 1 >= r1 && !shortEnd(stemmed))) w = stemmed;
    } else if (w.endsWith("ll") && w.length - 1 >= r2) w = w.slice(0, -1);
    return w.replace(/Y/g, "y");
  }


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

  function scored(index, words, allowed) {
    // search/score.py, scored.
    if (!index.texts) return [];
    var weight = 0;
    var known = [];
    words.forEach(function (word) {
      var key = index.stemmed ? stem(word) : word;
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
      scored(part.index, words, allowed)
        .filter(function (hit) { return hit[1] >= least; })
        .slice(0, most)
        .forEach(function (hit) { hits.push([kind].concat(part.entries[hit[0]], [hit[1]])); });
    });
    return hits.sort(function (a, b) { return b[7] - a[7]; });
  }

  if (typeof module === "object" && module.exports) module.exports = { search: search, stem: stem };
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
