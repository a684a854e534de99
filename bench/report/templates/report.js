// Case drill-down: filters, search and pagination over the embedded JSON rows.
// Model output is untrusted: it is only ever assigned to textContent (never parsed as HTML).
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var F = {};
  data.fields.forEach(function (name, i) { F[name] = i; });
  var PAGE = 50;
  var page = 0;
  var matches = [];
  var haystacks = null;  // lower-cased search text per row, built on the first search

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  // anchors are the page's own ids ("ep-<n>"), never model output
  function link(href, text) {
    var a = el("a", text);
    a.href = href;
    return a;
  }
  function timelineLink(id) {  // opens the episode's <details> as it jumps there
    var a = link("#" + id, "step-by-step timeline");
    a.addEventListener("click", function () { document.getElementById(id).open = true; });
    return a;
  }
  function fill(id, values) {
    var select = document.getElementById(id);
    values.forEach(function (value, i) {
      var option = el("option", value);
      option.value = String(i);
      select.appendChild(option);
    });
  }
  fill("f-outcome", data.outcomes);
  fill("f-variant", data.variants);
  fill("f-provider", data.providers);
  fill("f-tool", data.tools);
  fill("f-tag", data.tags);
  fill("f-code", data.codes);

  function value(id) {
    var v = document.getElementById(id).value;
    return v === "" ? -1 : Number(v);
  }
  function haystack(row) {
    var c = data.cases[row[F.case]];
    return [c[0], c[1], row[F.raw], row[F.text], row[F.parse_error],
            row[F.episode] ? row[F.episode][1] : "",
            row[F.codes].map(function (i) { return data.codes[i]; }).join(" "),
            JSON.stringify(row[F.calls])].join("\n").toLowerCase();
  }
  function apply() {
    var outcome = value("f-outcome"), variant = value("f-variant"),
        provider = value("f-provider"), tool = value("f-tool"), tag = value("f-tag"),
        code = value("f-code");
    var query = document.getElementById("f-search").value.trim().toLowerCase();
    if (query && !haystacks) haystacks = data.rows.map(haystack);
    matches = [];
    for (var i = 0; i < data.rows.length; i++) {
      var row = data.rows[i];
      if (outcome >= 0 && row[F.outcome] !== outcome) continue;
      if (variant >= 0 && row[F.variant] !== variant) continue;
      if (provider >= 0 && row[F.provider] !== provider) continue;
      if (tool >= 0 && row[F.tools].indexOf(tool) < 0) continue;
      if (tag >= 0 && data.cases[row[F.case]][2].indexOf(tag) < 0) continue;
      if (code >= 0 && row[F.codes].indexOf(code) < 0) continue;
      if (query && haystacks[i].indexOf(query) < 0) continue;
      matches.push(i);
    }
    page = 0;
    render();
  }
  function pretty(v) {
    return typeof v === "string" ? v : JSON.stringify(v, null, 2);
  }
  function block(parent, title, content) {
    if (content === null || content === undefined || content === "" ||
        (Array.isArray(content) && content.length === 0)) return;
    parent.appendChild(el("h4", title));
    parent.appendChild(el("pre", pretty(content)));
  }
  // Expected calls, one argument per line: "name: value | value | (may be omitted)".
  function expectedText(expected) {
    if (expected.no_call) return "no call (no tool fits)";
    if (expected.ask) return "no call (information is missing: ask the user)";
    return (expected.calls || []).map(function (call) {
      var lines = [call.name];
      Object.keys(call.arguments || {}).forEach(function (name) {
        var values = call.arguments[name].map(function (v) {
          return v === null ? "(may be omitted)" : JSON.stringify(v);
        });
        lines.push("  " + name + ": " + values.join(" | "));
      });
      return lines.join("\n");
    }).join("\n") + (expected.ordered ? "\n(in this order)" : "");
  }
  function callsText(calls) {
    return calls.map(function (call) {
      return call[0] + " " + (typeof call[1] === "string" ? call[1] : JSON.stringify(call[1]));
    }).join("\n");
  }
  function detail(row) {
    var c = data.cases[row[F.case]];
    var box = el("div", null, "detail");
    block(box, "query", c[1]);
    block(box, "tags", c[2].map(function (i) { return data.tags[i]; }).join(", "));
    block(box, row[F.episode] ? "required calls" : "expected calls", expectedText(c[3]));
    var episode = row[F.episode];
    if (episode) {
      block(box, "episode trajectory", episode[1]);
      box.appendChild(episode[0] ? timelineLink(episode[0]) :
                      el("p", "(this episode's timeline is not drawn: the Episodes section " +
                         "shows a sample; results.jsonl has every step)", "note"));
    }
    block(box, "raw response", row[F.raw]);
    block(box, "parse error", row[F.parse_error]);
    block(box, "model text", row[F.text]);
    if (!episode) {  // an episode's calls are in its trajectory
      block(box, "parsed calls", row[F.calls].length ? callsText(row[F.calls]) :
            (row[F.parse_error] ? null : "(no call)"));
    }
    block(box, "executor result", row[F.execution]);
    block(box, "error codes", row[F.codes].map(function (i) { return data.codes[i]; }).join(", "));
    block(box, "argument errors", row[F.argument_errors].join("\n"));
    var tokens = row[F.tokens];
    var facts = "run " + data.runs[row[F.run]] + " · latency " + row[F.latency_s] + " s · tokens prompt " +
      tokens[0] + ", completion " + tokens[1] + ", cached " + tokens[2] +
      (row[F.cost_usd] === null ? "" : " · cost " + row[F.cost_usd] + " USD") +
      (row[F.cache] === null ? "" : " · cache " + row[F.cache]);
    box.appendChild(el("p", facts, "note"));
    return box;
  }
  function toggle(tr, index) {
    var next = tr.nextSibling;
    if (next && next.className === "detail-row") {
      next.parentNode.removeChild(next);
      tr.setAttribute("aria-expanded", "false");
      return;
    }
    var holder = el("tr", null, "detail-row");
    var cell = el("td");
    cell.colSpan = 7;
    cell.appendChild(detail(data.rows[index]));
    holder.appendChild(cell);
    tr.parentNode.insertBefore(holder, tr.nextSibling);
    tr.setAttribute("aria-expanded", "true");
  }
  function render() {
    var body = document.getElementById("case-rows");
    body.textContent = "";
    var pages = Math.max(1, Math.ceil(matches.length / PAGE));
    var start = page * PAGE;
    matches.slice(start, start + PAGE).forEach(function (index) {
      var row = data.rows[index];
      var c = data.cases[row[F.case]];
      var tr = el("tr", null, "case");
      tr.tabIndex = 0;
      tr.setAttribute("aria-expanded", "false");
      var outcome = data.outcomes[row[F.outcome]];
      [c[0], data.variants[row[F.variant]], data.providers[row[F.provider]], row[F.trial]]
        .forEach(function (v) { tr.appendChild(el("td", v)); });
      tr.appendChild(el("td", outcome, "outcome " + outcome));
      tr.appendChild(el("td", row[F.codes].map(function (i) { return data.codes[i]; }).join(", ")));
      var query = c[1] || "";
      tr.appendChild(el("td", query.length > 120 ? query.slice(0, 120) + "…" : query, "query"));
      tr.addEventListener("click", function () { toggle(tr, index); });
      tr.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); toggle(tr, index); }
      });
      body.appendChild(tr);
    });
    document.getElementById("count").textContent = matches.length + " of " + data.rows.length +
      " rows match";
    document.getElementById("page").textContent = "page " + (page + 1) + " of " + pages;
    document.getElementById("prev").disabled = page === 0;
    document.getElementById("next").disabled = page + 1 >= pages;
  }
  var timer = null;
  document.getElementById("f-search").addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(apply, 150);
  });
  ["f-outcome", "f-variant", "f-provider", "f-tool", "f-tag", "f-code"].forEach(function (id) {
    document.getElementById(id).addEventListener("change", apply);
  });
  document.getElementById("filters").addEventListener("submit", function (e) { e.preventDefault(); });
  document.getElementById("prev").addEventListener("click", function () { page--; render(); });
  document.getElementById("next").addEventListener("click", function () { page++; render(); });
  apply();
}());
