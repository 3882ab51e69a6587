// Draws the report's charts from the embedded JSON. Charts in the page body are drawn at
// once; a run's charts when its drill-down is first opened (hundreds of hidden charts would
// make the page slow to open). window.reportReady turns true when the first batch is drawn;
// each drawn chart carries data-drawn="yes" and data-points (points in its traces).
(function () {
  "use strict";
  var report = JSON.parse(document.getElementById("report-data").textContent);
  var figures = {};
  function collect(list) {
    (list || []).forEach(function (c) { figures[c.id] = c.figure; });
  }
  collect(report.charts);
  collect(report.cpu_flames);
  report.cells.forEach(function (cell) { collect(cell.charts); });
  report.runs.forEach(function (run) { collect(run.charts); });

  var config = { displaylogo: false, responsive: true };

  function points(figure) {
    return figure.data.reduce(function (n, trace) {
      return n + (trace.y ? trace.y.length : 0);
    }, 0);
  }

  function draw(el) {
    var figure = figures[el.dataset.chart];
    if (!figure || el.dataset.drawn) { return Promise.resolve(); }
    el.dataset.drawn = "pending";
    return Plotly.newPlot(el, figure.data, figure.layout, config).then(function () {
      el.dataset.drawn = "yes";
      el.dataset.points = String(points(figure));
    });
  }

  function drawIn(root) {
    return Promise.all(Array.prototype.map.call(root.querySelectorAll(".chart"), draw));
  }

  function openFromHash() {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    var details = target && target.closest("details");
    if (details) { details.open = true; target.scrollIntoView(); }
  }

  document.querySelectorAll("details.run").forEach(function (details) {
    details.addEventListener("toggle", function () {
      if (details.open) { drawIn(details); }
    });
  });
  window.addEventListener("hashchange", openFromHash);

  var eager = Array.prototype.filter.call(document.querySelectorAll(".chart"), function (el) {
    return !el.closest("details");
  });
  Promise.all(eager.map(draw)).then(function () {
    openFromHash();
    window.reportReady = true;
  }, function (error) {
    console.error("pgdyno report: a chart failed to draw: " + error);
    window.reportReady = true;
  });
})();
