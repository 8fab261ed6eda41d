/* envsnap report: optional conveniences only. Without JavaScript every part is still readable
   (<details> opens natively, the workers toggle is a CSS checkbox). This script reads the page's
   own text, never inserts markup, and is the only script the page's Content-Security-Policy allows. */
(function () {
  "use strict";
  var doc = document;
  doc.documentElement.classList.add("js");

  function all(selector, scope) {
    return Array.prototype.slice.call((scope || doc).querySelectorAll(selector));
  }

  // "Expand all" / "Collapse all" buttons: data-expand="open|close", data-scope="<section id>".
  all("[data-expand]").forEach(function (button) {
    button.addEventListener("click", function () {
      var open = button.getAttribute("data-expand") === "open";
      var scope = doc.getElementById(button.getAttribute("data-scope")) || doc;
      all("details", scope).forEach(function (d) { d.open = open; });
    });
  });

  // Filter of the all-differences tables: hides rows whose text does not contain the query.
  var filter = doc.getElementById("diff-filter");
  if (filter) {
    filter.addEventListener("input", function () {
      var query = filter.value.trim().toLowerCase();
      all("#differences details.category").forEach(function (group) {
        var hits = 0;
        all("tbody tr", group).forEach(function (row) {
          var show = !query || row.textContent.toLowerCase().indexOf(query) !== -1;
          row.hidden = !show;
          if (show) { hits += 1; }
        });
        group.hidden = Boolean(query) && hits === 0;
        if (query) {
          all("details", group).concat([group]).forEach(function (d) { d.open = hits > 0; });
        }
      });
    });
  }

  // Printing shows everything: open every closed <details> for the print, close them after.
  var reopened = [];
  window.addEventListener("beforeprint", function () {
    all("details:not([open])").forEach(function (d) { d.open = true; reopened.push(d); });
  });
  window.addEventListener("afterprint", function () {
    reopened.forEach(function (d) { d.open = false; });
    reopened = [];
  });
}());
