/* Every instant in the admin is written in UTC to the second (<time class="tasks-time">);
   on hover this adds the viewer's local time and how long ago or ahead it is.
   Vendored, no dependencies. */
(function () {
  "use strict";
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
  var parts = new Intl.DateTimeFormat("en-GB", {
    year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit",
    second: "2-digit", hour12: false, timeZoneName: "short"
  });
  var relative = window.Intl && Intl.RelativeTimeFormat ?
    new Intl.RelativeTimeFormat("en", { numeric: "always" }) : null;
  var UNITS = [["day", 86400], ["hour", 3600], ["minute", 60], ["second", 1]];

  function localText(date) {
    var p = {};
    parts.formatToParts(date).forEach(function (x) { p[x.type] = x.value; });
    return p.year + "-" + p.month + "-" + p.day + " " + p.hour + ":" + p.minute + ":" +
      p.second + " " + (p.timeZoneName || "");
  }

  function relativeText(date) {
    var seconds = (date.getTime() - Date.now()) / 1000;
    if (!relative) { return ""; }
    for (var i = 0; i < UNITS.length; i++) {
      if (Math.abs(seconds) >= UNITS[i][1] || UNITS[i][0] === "second") {
        return relative.format(Math.round(seconds / UNITS[i][1]), UNITS[i][0]);
      }
    }
    return "";
  }

  function annotate(node) {
    var date = new Date(node.getAttribute("datetime"));
    if (isNaN(date.getTime())) { return; }
    node.title = node.textContent.trim() + "\nYour time (" + zone + "): " + localText(date) +
      "\n" + relativeText(date);
  }

  function annotateAll(root) {
    (root || document).querySelectorAll("time.tasks-time").forEach(annotate);
  }
  window.tasksAnnotateTimes = annotateAll;
  document.addEventListener("DOMContentLoaded", function () {
    annotateAll();
    // The run and task lists are the widest pages: start them with the app sidebar folded,
    // so every column fits 1,400 px; the » toggle still opens it.
    var body = document.body;
    var main = document.getElementById("main");
    var wide = body.classList.contains("model-run") || body.classList.contains("model-task");
    if (main && wide && body.classList.contains("change-list")) {
      main.classList.remove("shifted");
    }
  });
  // The relative part goes stale: refresh it when the pointer reaches a time.
  document.addEventListener("mouseover", function (event) {
    var node = event.target.closest && event.target.closest("time.tasks-time");
    if (node) { annotate(node); }
  });
})();
