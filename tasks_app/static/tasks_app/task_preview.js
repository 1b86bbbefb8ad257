/* Task page: preview the schedule (in words, next five fires) as the operator types, and
   show only the schedule fields that apply to the chosen kind. Vendored, no dependencies. */
(function () {
  "use strict";
  var FIELDS = ["schedule_type", "cron", "timezone", "interval_seconds",
                "run_at_0", "run_at_1", "end_at_0", "end_at_1"];
  var ROWS = { once: ["run_at"], interval: ["interval_seconds"], cron: ["cron", "timezone"], none: [] };
  var timer = null;

  function el(id) { return document.getElementById("id_" + id); }

  function toggleRows() {
    var kind = el("schedule_type") ? el("schedule_type").value : "none";
    ["run_at", "interval_seconds", "cron", "timezone"].forEach(function (name) {
      var row = document.querySelector(".form-row.field-" + name) ||
                document.querySelector(".field-" + name);
      if (!row) { return; }
      var wanted = (ROWS[kind] || []).indexOf(name) >= 0 || row.classList.contains("errors");
      row.style.display = wanted ? "" : "none";
    });
  }

  function render(box, data) {
    var words = box.querySelector(".tasks-words");
    var list = box.querySelector(".tasks-fires");
    var error = box.querySelector(".tasks-preview-error");
    list.innerHTML = "";
    error.hidden = true;
    if (data.errors) {
      words.textContent = "";
      error.hidden = false;
      error.textContent = Object.keys(data.errors).map(function (k) {
        return k + ": " + data.errors[k].map(function (e) { return e.message; }).join(" ");
      }).join("; ");
      return;
    }
    words.textContent = data.description;
    if (!data.fires.length) {
      var none = document.createElement("li");
      none.className = "tasks-muted";
      none.textContent = "no upcoming fire";
      list.appendChild(none);
    }
    data.fires.forEach(function (f) {
      var li = document.createElement("li");
      var local = document.createElement("span");
      local.className = "tasks-mono";
      local.textContent = f.local_text;
      li.appendChild(local);
      if (f.utc_text !== f.local_text) {
        var utc = document.createElement("span");
        utc.className = "tasks-muted";
        utc.textContent = " " + f.utc_text;
        li.appendChild(utc);
      }
      list.appendChild(li);
    });
  }

  function refresh() {
    var box = document.getElementById("schedule-preview");
    if (!box) { return; }
    // A kind just chosen, its field still empty: say what to type, ask the server nothing
    // (it would answer that the field is required, a 400 in the browser's console).
    var kind = el("schedule_type") ? el("schedule_type").value : "none";
    var needed = { cron: "cron", interval: "interval_seconds", once: "run_at_0" }[kind];
    if (needed && el(needed) && !el(needed).value.trim()) {
      box.querySelector(".tasks-fires").innerHTML = "";
      box.querySelector(".tasks-preview-error").hidden = true;
      box.querySelector(".tasks-words").textContent =
        { cron: "Type a cron expression", interval: "Type the interval in seconds",
          once: "Choose the date and time" }[kind] + " to see the next fires.";
      box.setAttribute("data-state", "ready");
      return;
    }
    var params = new URLSearchParams();
    FIELDS.forEach(function (name) {
      var input = el(name);
      if (input) { params.set(name, input.value); }
    });
    box.setAttribute("data-state", "loading");
    fetch(box.getAttribute("data-url") + "?" + params.toString(), {
      credentials: "same-origin", headers: { "Accept": "application/json" }
    }).then(function (response) { return response.json(); })
      .then(function (data) { render(box, data); box.setAttribute("data-state", "ready"); })
      .catch(function () { box.setAttribute("data-state", "error"); });
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(refresh, 250);
  }

  document.addEventListener("DOMContentLoaded", function () {
    toggleRows();
    FIELDS.forEach(function (name) {
      var input = el(name);
      if (!input) { return; }
      input.addEventListener("input", schedule);
      input.addEventListener("change", function () { toggleRows(); schedule(); });
    });
  });
})();
