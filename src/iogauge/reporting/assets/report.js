/* iogauge report: the charts, drawn on canvas in plain JavaScript (no library, no network).
 *
 * Reads the JSON data block (script#iogauge-data) written by reporting/html_report.py:
 *   base      epoch seconds every time offset is counted from
 *   relative  {interval} when the data are reports without time stamps (model/timeline.py):
 *             times then read as report numbers, never as clock times or durations
 *   metrics   name -> {title, unit, decimals} (reporting/metrics.py, shared with Python)
 *   devices[] {id, key, ts: {mode: raw|minmax, t[], n[], dt, breaks[], series: {name: {lo[], hi[]}}},
 *              marks: {worst: [[start, end, metric, value, unit]], findings: [[index, start, end, severity]]},
 *              charts: [{el, type: ts|scatter|mix|hist|stack, ...}]}
 *   guarantee[] {id, t[], n[], dt, breaks[], series, misses[], charts[]}
 * In minmax mode each point is one pixel column's bucket: lo/hi are the min and max of the
 * samples in it, drawn as a band so single-sample peaks stay visible.
 *
 * Rendering is progressive: the charts near the first screen are drawn at once (then <body>
 * gets data-ready="1" and data-ready-ms, milliseconds since navigation start), the others in
 * short slices after (then data-complete="1" and data-complete-ms). Every drawn chart
 * <figure> carries data-points (values drawn) and data-rendered="1"; <body> carries
 * data-charts-rendered (charts with data), data-charts-total, data-render-ms (time spent
 * drawing) and data-js-errors (count, only when there were errors): the end-to-end test in a
 * real browser and the benchmark read them.
 */
(function () {
  'use strict';
  var body = document.body;
  var errors = [];

  function recordError(msg) {
    errors.push(String(msg));
    body.dataset.jsErrors = String(errors.length);
    var box = document.getElementById('js-errors');
    if (box) {
      box.hidden = false;
      box.textContent = 'Chart error: ' + errors.join('; ');
    }
  }
  window.addEventListener('error', function (ev) {
    recordError(ev.message || String(ev.error));
  });

  var DATA;
  try {
    DATA = JSON.parse(document.getElementById('iogauge-data').textContent);
  } catch (e) {
    recordError('data block unreadable: ' + e.message);
    return;
  }
  var MET = DATA.metrics || {};
  var BASE = DATA.base || 0;
  var REL = DATA.relative || null;
  function reportNo(sec) { return Math.round((BASE + sec) / REL.interval); }
  var state = { local: false, dpr: window.devicePixelRatio || 1 };

  var COLORS = {
    r_iops: '#1f77b4', w_iops: '#ff7f0e', d_iops: '#7f7f7f', iops: '#1f77b4',
    r_MBps: '#1f77b4', w_MBps: '#ff7f0e', d_MBps: '#7f7f7f', MBps: '#1f77b4',
    r_await_ms: '#1f77b4', w_await_ms: '#ff7f0e', await_ms: '#d62728', svctm_ms: '#2ca02c',
    util_pct: '#9467bd', aqu_sz: '#8c564b',
    a_iops: '#2ca02c', a_floor_iops: '#c62828', b_iops: '#1f77b4', b_limit_iops: '#ff7f0e',
    x_pct: '#c62828'
  };
  var DASHED = { a_floor_iops: true, b_limit_iops: true, x_pct: true };
  var SEV = { critical: '#c62828', warning: '#ef8f00', info: '#1565c0' };
  var RMF_COLORS = { iosq_ms: '#9467bd', pend_ms: '#ff7f0e', disc_ms: '#d62728', conn_ms: '#1f77b4' };
  var M = { l: 60, r: 14, t: 12, b: 26 };

  // ---- formatting --------------------------------------------------------------------------
  var NF = {};
  function num(v, d) {
    if (v === null || v === undefined || !isFinite(v)) return '\u2013';
    // one formatter per precision: building an Intl.NumberFormat per call costs more than the drawing
    var f = NF[d] || (NF[d] = new Intl.NumberFormat('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }));
    return f.format(v);
  }
  function meta(name) { return MET[name] || { title: name, unit: '', decimals: 2 }; }
  function fmt(name, v) {
    var m = meta(name);
    var s = num(v, m.decimals);
    if (m.unit && s !== '\u2013') s += (m.unit === '%' ? ' %' : ' ' + m.unit);
    return s;
  }
  function axisLabel(name) {
    var m = meta(name);
    return m.unit ? m.title + ' (' + m.unit + ')' : m.title;
  }
  function short(v) {
    var a = Math.abs(v);
    if (a >= 1e6) return num(v / 1e6, a >= 1e7 ? 0 : 1) + 'M';
    if (a >= 1e4) return num(v / 1e3, a >= 1e5 ? 0 : 1) + 'k';
    if (a >= 100 || a === 0) return num(v, 0);
    if (a >= 1) return num(v, v % 1 === 0 ? 0 : 1);
    return String(Number(v.toPrecision(2)));
  }
  function pad(n) { return n < 10 ? '0' + n : String(n); }
  function parts(sec) {
    var d = new Date((BASE + sec) * 1000);
    if (state.local) {
      return [d.getFullYear(), d.getMonth() + 1, d.getDate(), d.getHours(), d.getMinutes(), d.getSeconds()];
    }
    return [d.getUTCFullYear(), d.getUTCMonth() + 1, d.getUTCDate(), d.getUTCHours(),
      d.getUTCMinutes(), d.getUTCSeconds()];
  }
  function fmtTime(sec) {
    if (REL) return 'report ' + reportNo(sec);
    var p = parts(sec);
    return p[0] + '-' + pad(p[1]) + '-' + pad(p[2]) + ' ' + pad(p[3]) + ':' + pad(p[4]) + ':' +
      pad(p[5]) + (state.local ? '' : 'Z');
  }
  function fmtDur(s) {
    if (REL) return num(s / REL.interval, 0) + ' report(s)';
    if (s < 120) return num(s, s % 1 === 0 ? 0 : 1) + ' s';
    if (s < 7200) return num(s / 60, 1) + ' min';
    if (s < 172800) return num(s / 3600, 1) + ' h';
    return num(s / 86400, 1) + ' days';
  }
  function tzShift() { return state.local ? -new Date(BASE * 1000).getTimezoneOffset() * 60 : 0; }
  function tickText(sec, step) {
    if (REL) return '#' + reportNo(sec);
    var p = parts(sec);
    if (step >= 86400) return pad(p[1]) + '-' + pad(p[2]);
    if (step >= 60) {
      var hm = pad(p[3]) + ':' + pad(p[4]);
      return (p[3] === 0 && p[4] === 0) ? pad(p[1]) + '-' + pad(p[2]) + ' ' + hm : hm;
    }
    return pad(p[3]) + ':' + pad(p[4]) + ':' + pad(p[5]);
  }
  function rgba(hex, a) {
    var n = parseInt(hex.slice(1), 16);
    return 'rgba(' + ((n >> 16) & 255) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + a + ')';
  }

  // ---- scales ------------------------------------------------------------------------------
  function niceTicks(max, count) {
    if (!(max > 0)) max = 1;
    var raw = max / Math.max(1, count);
    var p = Math.pow(10, Math.floor(Math.log10(raw)));
    var f = raw / p;
    var step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * p;
    var top = Math.ceil(max / step - 1e-9) * step;
    var ticks = [];
    for (var v = 0; v <= top + step / 2; v += step) ticks.push(v);
    return { max: top, ticks: ticks };
  }
  var TIME_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
    43200, 86400, 172800, 604800, 2592000];
  function timeTicks(x0, x1, maxTicks) {
    var span = x1 - x0;
    var step = TIME_STEPS[TIME_STEPS.length - 1];
    for (var i = 0; i < TIME_STEPS.length; i++) {
      if (span / TIME_STEPS[i] <= maxTicks) { step = TIME_STEPS[i]; break; }
    }
    var shift = tzShift();
    var first = Math.ceil((BASE + x0 + shift) / step) * step - BASE - shift;
    var out = [];
    for (var t = first; t <= x1; t += step) out.push(t);
    return { step: step, ticks: out };
  }
  function lowerBound(a, v) {
    var lo = 0, hi = a.length;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (a[mid] < v) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // ---- tooltip -----------------------------------------------------------------------------
  var tip = document.createElement('div');
  tip.className = 'tip';
  tip.hidden = true;
  body.appendChild(tip);
  function showTip(ev, lines) {
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    lines.forEach(function (ln, i) {
      var div = document.createElement('div');
      if (i === 0) div.className = 'tip-head';
      if (typeof ln === 'string') {
        div.textContent = ln;
      } else {
        var sw = document.createElement('span');
        sw.className = 'sw';
        sw.style.background = ln.color;
        div.appendChild(sw);
        div.appendChild(document.createTextNode(ln.text));
      }
      tip.appendChild(div);
    });
    tip.hidden = false;
    var x = ev.clientX + 14, y = ev.clientY + 14;
    var r = tip.getBoundingClientRect();
    if (x + r.width > window.innerWidth - 8) x = ev.clientX - r.width - 14;
    if (y + r.height > window.innerHeight - 8) y = ev.clientY - r.height - 14;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  }
  function hideTip() { tip.hidden = true; }

  // ---- plot base ---------------------------------------------------------------------------
  function Plot(fig, height) {
    this.fig = fig;
    this.wrap = fig.querySelector('.plot');
    this.base = fig.querySelector('canvas.base');
    this.over = null;  // the hover/selection layer, made on first use (canvases are not free)
    this.octx = null;
    this.ctx = this.base.getContext('2d');
    this.h = height;
    this.w = 0;
    this.points = 0;
    this.legendEl = fig.querySelector('.legend');
  }
  Plot.prototype.measure = function () { this.cw = this.wrap.clientWidth; };
  // Give the canvas its final size before anything is drawn: resizing a canvas changes the
  // page's layout, and one layout for all charts is much cheaper than one per drawing slice.
  Plot.prototype.presize = function () {
    this.w = this.cw || this.w || 900;
    this.fit(this.base, this.ctx);
  };
  Plot.prototype.size = function () {
    var w = this.cw || this.w || 900;
    var dpr = state.dpr;
    this.w = w;
    this.pw = Math.max(10, w - M.l - M.r);
    this.ph = Math.max(10, this.h - M.t - M.b);
    this.fit(this.base, this.ctx);
    if (this.over) this.fit(this.over, this.octx);
  };
  Plot.prototype.fit = function (c, ctx) {
    var dpr = state.dpr, W = Math.round(this.w * dpr), H = Math.round(this.h * dpr);
    if (c.width !== W || c.height !== H) {  // resizing reallocates: only when it changed
      c.width = W;
      c.height = H;
      c.style.width = this.w + 'px';
      c.style.height = this.h + 'px';
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  };
  Plot.prototype.overlay = function () {
    if (!this.over) {
      var c = document.createElement('canvas');
      c.className = 'overlay';
      this.wrap.appendChild(c);
      this.over = c;
      this.octx = c.getContext('2d');
      this.fit(c, this.octx);
    }
    this.octx.clearRect(0, 0, this.w, this.h);
    return this.octx;
  };
  Plot.prototype.clearOverlay = function () {
    if (this.octx) this.octx.clearRect(0, 0, this.w, this.h);
  };
  Plot.prototype.pos = function (ev) {
    var r = this.base.getBoundingClientRect();
    return { x: (ev.clientX - r.left) * (this.w / r.width), y: (ev.clientY - r.top) * (this.h / r.height) };
  };
  Plot.prototype.done = function (points) {
    this.points = points;
    this.fig.dataset.points = String(points);
    this.fig.dataset.rendered = '1';
  };
  Plot.prototype.yAxis = function (ticks, ymax, label, fmtTick) {
    var c = this.ctx, self = this;
    c.font = '11px system-ui, sans-serif';
    c.textAlign = 'right';
    c.textBaseline = 'middle';
    ticks.forEach(function (v) {
      var y = M.t + self.ph - v / ymax * self.ph;
      c.strokeStyle = '#e3e8ec';
      c.lineWidth = 1;
      c.beginPath(); c.moveTo(M.l, Math.round(y) + 0.5); c.lineTo(M.l + self.pw, Math.round(y) + 0.5); c.stroke();
      c.fillStyle = '#5b6670';
      c.fillText(fmtTick ? fmtTick(v) : short(v), M.l - 6, y);
    });
    c.save();
    c.translate(12, M.t + this.ph / 2);
    c.rotate(-Math.PI / 2);
    c.textAlign = 'center';
    c.fillStyle = '#3a444d';
    c.fillText(label, 0, 0);
    c.restore();
  };
  Plot.prototype.frame = function () {
    var c = this.ctx;
    c.strokeStyle = '#9aa5ae';
    c.lineWidth = 1;
    c.strokeRect(M.l + 0.5, M.t + 0.5, this.pw, this.ph);
  };
  Plot.prototype.legend = function (items) {
    var el = this.legendEl, self = this;
    if (!el) return;
    while (el.firstChild) el.removeChild(el.firstChild);
    items.forEach(function (it) {
      if (it.fixed) {
        var span = document.createElement('span');
        span.className = 'lg fixed';
        var sw0 = document.createElement('span');
        sw0.className = 'sw';
        sw0.style.background = it.color;
        span.appendChild(sw0);
        span.appendChild(document.createTextNode(it.label));
        el.appendChild(span);
        return;
      }
      var b = document.createElement('button');
      b.type = 'button';
      b.className = 'lg' + (it.on() ? '' : ' off');
      b.setAttribute('aria-pressed', it.on() ? 'true' : 'false');
      var sw = document.createElement('span');
      sw.className = 'sw' + (it.dash ? ' dash' : '');
      sw.style.background = it.color;
      b.appendChild(sw);
      b.appendChild(document.createTextNode(it.label));
      b.addEventListener('click', function () {
        it.toggle();
        b.classList.toggle('off', !it.on());
        b.setAttribute('aria-pressed', it.on() ? 'true' : 'false');
        self.redraw();
      });
      el.appendChild(b);
    });
  };
  Plot.prototype.redraw = function () { this.draw(); };

  // ---- time series -------------------------------------------------------------------------
  var dragging = null;
  window.addEventListener('mouseup', function (ev) {
    if (dragging) { var d = dragging; dragging = null; d.endDrag(ev); }
  });

  function fullView(group) {
    var t = group.ts.t;
    if (!t.length) return [0, 1];
    var a = typeof group.ts.t0 === 'number' ? Math.min(group.ts.t0, t[0]) : t[0], b = t[t.length - 1];
    if (b - a <= 0) { var h = Math.max(30, group.ts.dt || 30); return [a - h, b + h]; }
    return [a, b];
  }
  function viewOf(group) { return group.view || fullView(group); }
  function setView(group, v) {
    if (v) {
      var f = fullView(group);
      var minSpan = Math.max(2, (group.ts.dt || 1) * 4);
      if (v[1] - v[0] < minSpan) { var mid = (v[0] + v[1]) / 2; v = [mid - minSpan / 2, mid + minSpan / 2]; }
      if (v[0] <= f[0] && v[1] >= f[1]) v = null;
    }
    group.view = v;
    group.charts.forEach(function (ch) {
      ch.draw();
      // the visible time range, for tests and for anyone scripting the page
      ch.fig.dataset.view = v ? Math.round(v[0]) + ',' + Math.round(v[1]) : '';
    });
  }

  function TimeChart(fig, group, spec) {
    Plot.call(this, fig, 190);
    this.group = group;
    this.spec = spec;
    var ts = group.ts;
    this.breaks = {};
    (ts.breaks || []).forEach(function (i) { this.breaks[i] = true; }, this);
    this.series = spec.series.filter(function (n) { return ts.series[n]; }).map(function (n) {
      var s = ts.series[n];
      return { name: n, lo: s.lo, hi: s.hi || null, color: COLORS[n] || '#333333', on: true, dash: !!DASHED[n] };
    });
    this.showWorst = true;
    this.showFind = true;
    this.sel = null;
    var self = this, items = this.series.map(function (s) {
      return { label: meta(s.name).title, color: s.color, dash: s.dash,
        on: function () { return s.on; }, toggle: function () { s.on = !s.on; } };
    });
    if (group.marks.worst.length) {
      items.push({ label: 'worst windows', color: '#b0b8bf',
        on: function () { return self.showWorst; }, toggle: function () { self.showWorst = !self.showWorst; } });
    }
    if (group.marks.findings.length) {
      items.push({ label: 'findings', color: SEV.warning,
        on: function () { return self.showFind; }, toggle: function () { self.showFind = !self.showFind; } });
    }
    this.legend(items);
    this.bind();
  }
  TimeChart.prototype = Object.create(Plot.prototype);
  TimeChart.prototype.X = function (t) { var v = viewOf(this.group); return M.l + (t - v[0]) / (v[1] - v[0]) * this.pw; };
  TimeChart.prototype.T = function (x) { var v = viewOf(this.group); return v[0] + (x - M.l) / this.pw * (v[1] - v[0]); };
  TimeChart.prototype.Y = function (y) { return M.t + this.ph - y / this.ymax * this.ph; };
  TimeChart.prototype.range = function () {
    var t = this.group.ts.t, v = viewOf(this.group);
    return [Math.max(0, lowerBound(t, v[0]) - 1), Math.min(t.length - 1, lowerBound(t, v[1]))];
  };
  TimeChart.prototype.draw = function () {
    this.size();
    var c = this.ctx, self = this, g = this.group, t = g.ts.t, v = viewOf(g);
    c.clearRect(0, 0, this.w, this.h);
    var r = this.range(), i0 = r[0], i1 = r[1];
    var ymax = 0, allPct = true;
    this.series.forEach(function (s) {
      if (meta(s.name).unit !== '%') allPct = false;
      if (!s.on) return;
      var arr = s.hi || s.lo;
      for (var i = i0; i <= i1; i++) { var y = arr[i]; if (y !== null && y > ymax) ymax = y; }
    });
    ymax = allPct && ymax <= 100 ? 100 : ymax * 1.04;
    var yt = niceTicks(ymax, Math.max(2, Math.floor(this.ph / 38)));
    this.ymax = yt.max;
    var first = this.series[0] ? this.series[0].name : '';
    this.yAxis(yt.ticks, yt.max, this.spec.title + (meta(first).unit ? ' (' + meta(first).unit + ')' : ''));
    // time axis
    var tt = timeTicks(v[0], v[1], Math.max(2, Math.floor(this.pw / 95)));
    c.textAlign = 'center';
    c.textBaseline = 'top';
    c.fillStyle = '#5b6670';
    tt.ticks.forEach(function (tk) {
      var x = self.X(tk);
      c.strokeStyle = '#eef1f4';
      c.beginPath(); c.moveTo(Math.round(x) + 0.5, M.t); c.lineTo(Math.round(x) + 0.5, M.t + self.ph); c.stroke();
      c.fillText(tickText(tk, tt.step), x, M.t + self.ph + 6);
    });
    c.save();
    c.beginPath(); c.rect(M.l, M.t, this.pw, this.ph); c.clip();
    // worst windows (grey) and findings' windows (severity colour)
    if (this.showWorst) {
      g.marks.worst.forEach(function (w) {
        var x0 = self.X(w[0]), x1 = Math.max(self.X(w[1]), x0 + 2);
        c.fillStyle = 'rgba(90,100,110,0.13)';
        c.fillRect(x0, M.t, x1 - x0, self.ph);
      });
    }
    if (this.showFind) {
      g.marks.findings.forEach(function (f) {
        var x0 = self.X(f[1]), x1 = Math.max(self.X(f[2]), x0 + 2), col = SEV[f[3]] || SEV.info;
        c.fillStyle = rgba(col, 0.10);
        c.fillRect(x0, M.t, x1 - x0, self.ph);
        c.fillStyle = col;
        c.fillRect(x0, M.t, x1 - x0, 3);
        c.font = 'bold 10px system-ui, sans-serif';
        c.textAlign = 'left';
        c.textBaseline = 'top';
        c.fillText('#' + (f[0] + 1), x0 + 2, M.t + 4);
      });
    }
    var points = 0;
    this.series.forEach(function (s) { if (s.on) points += self.drawSeries(s, i0, i1); });
    if (g.misses && g.misses.length && this.spec.series.indexOf('a_iops') >= 0) {
      c.fillStyle = SEV.critical;
      g.misses.forEach(function (i) { var x = self.X(t[i]); c.fillRect(x - 1, M.t + self.ph - 8, 2, 8); });
    }
    c.restore();
    this.frame();
    this.done(points);
    this.drawOverlay();
  };
  TimeChart.prototype.drawSeries = function (s, i0, i1) {
    var c = this.ctx, t = this.group.ts.t, iv = this.group.ts.iv, self = this, lo = s.lo, hi = s.hi, n = 0;
    var segs = [], cur = null;
    for (var i = i0; i <= i1; i++) {
      var y = lo[i];
      if (y === null || y === undefined || (cur && this.breaks[i])) {
        if (cur) { segs.push(cur); cur = null; }
        if (y === null || y === undefined) continue;
      }
      if (!cur) cur = [i, i];
      cur[1] = i;
      n++;
    }
    if (cur) segs.push(cur);
    c.setLineDash(s.dash ? [5, 4] : []);
    segs.forEach(function (sg) {
      var a = sg[0], b = sg[1], i;
      if (hi) {
        c.beginPath();
        c.moveTo(self.X(t[a]), self.Y(hi[a]));
        for (i = a + 1; i <= b; i++) c.lineTo(self.X(t[i]), self.Y(hi[i]));
        for (i = b; i >= a; i--) c.lineTo(self.X(t[i]), self.Y(lo[i]));
        c.closePath();
        c.fillStyle = rgba(s.color, 0.35);
        c.fill();
      }
      var line = function (arr, width) {
        c.beginPath();
        c.moveTo(self.X(t[a]), self.Y(arr[a]));
        for (var j = a + 1; j <= b; j++) c.lineTo(self.X(t[j]), self.Y(arr[j]));
        c.strokeStyle = s.color;
        c.lineWidth = width;
        c.stroke();
      };
      if (!hi && iv) {
        // every sample: the interval's mean held over the interval (t - iv, t]
        c.beginPath();
        c.moveTo(self.X(t[a] - iv[a]), self.Y(lo[a]));
        c.lineTo(self.X(t[a]), self.Y(lo[a]));
        for (i = a + 1; i <= b; i++) {
          c.lineTo(self.X(t[i] - iv[i]), self.Y(lo[i]));
          c.lineTo(self.X(t[i]), self.Y(lo[i]));
        }
        c.strokeStyle = s.color;
        c.lineWidth = 1.5;
        c.stroke();
      } else if (a === b) {
        c.fillStyle = s.color;
        var ya = self.Y(hi ? hi[a] : lo[a]), yb = self.Y(lo[a]);
        c.fillRect(self.X(t[a]) - 1.5, ya - 1.5, 3, Math.max(3, yb - ya + 3));
      } else if (hi) {
        line(hi, 1);
        line(lo, 0.7);
      } else {
        line(lo, 1.5);
      }
    });
    c.setLineDash([]);
    return n;
  };
  TimeChart.prototype.nearest = function (tq) {
    var t = this.group.ts.t, iv = this.group.ts.iv;
    if (!t.length) return -1;
    var i = lowerBound(t, tq);
    if (i >= t.length) return t.length - 1;
    if (iv && t[i] - iv[i] <= tq) return i;
    if (i > 0 && tq - t[i - 1] < t[i] - tq) return i - 1;
    return i;
  };
  TimeChart.prototype.drawOverlay = function () {
    var self = this, hi = this.group.hoverI;
    if (!this.sel && (hi === null || hi === undefined || hi < 0)) { this.clearOverlay(); return; }
    var o = this.overlay();
    if (this.sel) {
      var a = Math.max(M.l, Math.min(this.sel[0], this.sel[1])), b = Math.min(M.l + this.pw, Math.max(this.sel[0], this.sel[1]));
      o.fillStyle = 'rgba(31,119,180,0.15)';
      o.fillRect(a, M.t, b - a, this.ph);
    }
    var i = this.group.hoverI;
    if (i === null || i === undefined || i < 0) return;
    var ts = this.group.ts, x = this.X(ts.iv ? ts.t[i] - ts.iv[i] / 2 : ts.t[i]);
    if (x < M.l || x > M.l + this.pw) return;
    o.strokeStyle = 'rgba(40,40,40,0.55)';
    o.lineWidth = 1;
    o.beginPath(); o.moveTo(Math.round(x) + 0.5, M.t); o.lineTo(Math.round(x) + 0.5, M.t + this.ph); o.stroke();
    this.series.forEach(function (s) {
      if (!s.on || s.lo[i] === null) return;
      o.fillStyle = s.color;
      [s.lo[i], s.hi ? s.hi[i] : null].forEach(function (y) {
        if (y === null) return;
        o.beginPath(); o.arc(x, self.Y(y), 3, 0, 2 * Math.PI); o.fill();
      });
    });
  };
  TimeChart.prototype.tooltip = function (ev, i) {
    var g = this.group, ts = g.ts, t = ts.t[i], lines = [];
    if (ts.mode === 'minmax') {
      var end = Math.min(t + ts.dt, i + 1 < ts.t.length ? ts.t[i + 1] : t + ts.dt);
      lines.push(fmtTime(t) + ' \u2026 ' + fmtDur(Math.max(0, end - t)) + ' (' + ts.n[i] + ' samples: min\u2013max)');
    } else if (ts.iv) {
      lines.push(fmtTime(t - ts.iv[i]) + ' \u2192 ' + fmtTime(t) + ' (' + fmtDur(ts.iv[i]) + ')');
    } else {
      lines.push(fmtTime(t));
    }
    this.series.forEach(function (s) {
      if (!s.on) return;
      var lo = s.lo[i], hi = s.hi ? s.hi[i] : null;
      var txt = meta(s.name).title + ': ' + (hi !== null && hi !== lo ? fmt(s.name, lo) + ' \u2013 ' + fmt(s.name, hi) : fmt(s.name, lo));
      lines.push({ color: s.color, text: txt });
    });
    g.marks.findings.forEach(function (f) {
      if (t >= f[1] && t <= f[2] + (ts.dt || 0)) {
        var info = (DATA.findings || [])[f[0]];
        lines.push({ color: SEV[f[3]] || SEV.info, text: '#' + (f[0] + 1) + ' ' + (info ? info.title : f[3]) });
      }
    });
    g.marks.worst.forEach(function (w) {
      if (t >= w[0] && t <= w[1] + (ts.dt || 0)) {
        lines.push({ color: '#b0b8bf', text: 'worst window: ' + meta(w[2]).title + ' ' + num(w[3], 2) + ' ' + w[4] });
      }
    });
    showTip(ev, lines);
  };
  TimeChart.prototype.bind = function () {
    var self = this, over = this.wrap, g = this.group;
    over.addEventListener('mousemove', function (ev) {
      var p = self.pos(ev);
      if (dragging === self && self.drag) {
        if (self.drag.pan) {
          var v = self.drag.view, dt = (p.x - self.drag.x) / self.pw * (v[1] - v[0]);
          setView(g, [v[0] - dt, v[1] - dt]);
        } else {
          self.sel = [self.drag.x, p.x];
          self.drawOverlay();
        }
        return;
      }
      if (p.x < M.l || p.x > M.l + self.pw) { self.leave(); return; }
      var i = self.nearest(self.T(p.x));
      g.hoverI = i;
      g.charts.forEach(function (ch) { ch.drawOverlay(); });
      if (i >= 0) self.tooltip(ev, i);
    });
    over.addEventListener('mouseleave', function () { if (dragging !== self) self.leave(); });
    over.addEventListener('mousedown', function (ev) {
      if (ev.button !== 0) return;
      var p = self.pos(ev);
      self.drag = { x: p.x, pan: ev.shiftKey, view: viewOf(g).slice() };
      dragging = self;
      ev.preventDefault();
    });
    over.addEventListener('dblclick', function () { setView(g, null); });
  };
  TimeChart.prototype.leave = function () {
    this.group.hoverI = null;
    this.group.charts.forEach(function (ch) { ch.drawOverlay(); });
    hideTip();
  };
  TimeChart.prototype.endDrag = function (ev) {
    var d = this.drag, p = this.pos(ev);
    this.drag = null;
    this.sel = null;
    if (!d) return;
    if (!d.pan && Math.abs(p.x - d.x) > 4) {
      var a = this.T(Math.min(p.x, d.x)), b = this.T(Math.max(p.x, d.x));
      setView(this.group, [a, b]);
    } else if (!d.pan) {
      var tq = this.T(p.x), hit = null;
      this.group.marks.findings.forEach(function (f) { if (tq >= f[1] && tq <= f[2]) hit = f[0]; });
      this.drawOverlay();
      if (hit !== null && this.showFind) location.hash = '#f' + hit;
    } else {
      this.drawOverlay();
    }
  };

  // ---- scatter -----------------------------------------------------------------------------
  function ScatterChart(fig, group, spec) {
    Plot.call(this, fig, 270);
    this.spec = spec;
    var d = spec.data;
    this.d = d;
    this.color = spec.y === 'util_pct' ? '#9467bd' : '#d62728';
    this.showPts = true;
    this.showFit = true;
    var self = this, fit = spec.fit || {};
    var items = [{ label: 'intervals (' + num(d.total, 0) + ')', color: this.color,
      on: function () { return self.showPts; }, toggle: function () { self.showPts = !self.showPts; } }];
    var hasFit = fit.busy_per_iops || fit.max_iops || fit.knee_iops || fit.typical_ms || fit.design_ms || fit.current_iops;
    if (hasFit) {
      items.push({ label: spec.y === 'util_pct' ? 'capacity fit, knee, max' : 'knee, max, expected latency',
        color: '#222222', dash: true,
        on: function () { return self.showFit; }, toggle: function () { self.showFit = !self.showFit; } });
    }
    this.legend(items);
    this.bind();
  }
  ScatterChart.prototype = Object.create(Plot.prototype);
  ScatterChart.prototype.draw = function () {
    this.size();
    var c = this.ctx, d = this.d, fit = this.spec.fit || {}, self = this;
    c.clearRect(0, 0, this.w, this.h);
    var xmax = 0, ymax = 0, i;
    for (i = 0; i < d.x.length; i++) { if (d.x[i] > xmax) xmax = d.x[i]; if (d.y[i] > ymax) ymax = d.y[i]; }
    if (this.showFit) {
      [fit.max_iops, fit.knee_iops, fit.current_iops].forEach(function (v) { if (v && v > xmax) xmax = v; });
      [fit.typical_ms, fit.design_ms].forEach(function (v) { if (v && v > ymax) ymax = v; });
    }
    ymax = this.spec.y === 'util_pct' && ymax <= 100 ? 100 : ymax * 1.04;
    var xt = niceTicks(xmax * 1.04, Math.max(2, Math.floor(this.pw / 80)));
    var yt = niceTicks(ymax, Math.max(2, Math.floor(this.ph / 40)));
    this.xmax = xt.max; this.ymax = yt.max;
    this.yAxis(yt.ticks, yt.max, axisLabel(this.spec.y));
    c.textAlign = 'center'; c.textBaseline = 'top'; c.fillStyle = '#5b6670';
    xt.ticks.forEach(function (v) {
      var x = self.X(v);
      c.strokeStyle = '#eef1f4';
      c.beginPath(); c.moveTo(Math.round(x) + 0.5, M.t); c.lineTo(Math.round(x) + 0.5, M.t + self.ph); c.stroke();
      c.fillText(short(v), x, M.t + self.ph + 6);
    });
    c.textAlign = 'right'; c.textBaseline = 'bottom'; c.fillStyle = '#3a444d';
    c.fillText(axisLabel(this.spec.x), M.l + this.pw - 4, M.t + this.ph - 3);
    c.save();
    c.beginPath(); c.rect(M.l, M.t, this.pw, this.ph); c.clip();
    var n = 0;
    if (this.showPts) {
      for (i = 0; i < d.x.length; i++) {
        var cnt = d.n[i] || 1;
        c.fillStyle = rgba(this.color, Math.min(0.9, 0.45 + 0.15 * Math.log10(cnt)));
        var rad = 2.5 + Math.min(2.5, Math.log10(cnt));
        c.beginPath(); c.arc(this.X(d.x[i]), this.Y(d.y[i]), rad, 0, 2 * Math.PI); c.fill();
        n++;
      }
    }
    if (this.showFit) this.drawFit(fit);
    c.restore();
    this.frame();
    this.done(n);
  };
  ScatterChart.prototype.X = function (v) { return M.l + v / this.xmax * this.pw; };
  ScatterChart.prototype.Y = function (v) { return M.t + this.ph - v / this.ymax * this.ph; };
  ScatterChart.prototype.drawFit = function (fit) {
    var c = this.ctx, self = this;
    function label(txt, x, y, align) {
      c.font = '11px system-ui, sans-serif';
      c.fillStyle = '#222222';
      c.textAlign = align || 'left';
      c.textBaseline = 'bottom';
      c.fillText(txt, x, y);
    }
    var row = 0;  // vertical lines label at successive heights so labels never overlap
    function vline(v, txt, dash, bottom) {
      var x = self.X(v), y = bottom ? M.t + self.ph - 20 : M.t + 14 + 14 * row++;
      c.strokeStyle = '#444444'; c.lineWidth = 1; c.setLineDash(dash);
      c.beginPath(); c.moveTo(x, M.t); c.lineTo(x, M.t + self.ph); c.stroke();
      c.setLineDash([]);
      if (x > M.l + self.pw - 140) label(txt, x - 3, y, 'right');
      else label(txt, x + 3, y);
    }
    function hline(v, txt, col) {
      var y = self.Y(v);
      c.strokeStyle = col; c.lineWidth = 1; c.setLineDash([6, 4]);
      c.beginPath(); c.moveTo(M.l, y); c.lineTo(M.l + self.pw, y); c.stroke();
      c.setLineDash([]);
      label(txt, M.l + 4, y - 2, 'left');
    }
    if (this.spec.y === 'util_pct') {
      var k = fit.busy_per_iops;
      if (k && k > 0) {
        var kneeX = fit.knee_iops || (fit.knee_util_pct ? fit.knee_util_pct / k : null);
        var maxX = fit.max_iops || 100 / k;
        var endLin = kneeX || maxX;
        c.strokeStyle = '#222222'; c.lineWidth = 2;
        c.beginPath(); c.moveTo(this.X(0), this.Y(0)); c.lineTo(this.X(endLin), this.Y(k * endLin)); c.stroke();
        if (kneeX) {
          var kneeY = fit.knee_util_pct || k * kneeX;
          c.setLineDash([6, 4]); c.lineWidth = 1.5;
          c.beginPath(); c.moveTo(this.X(kneeX), this.Y(k * kneeX)); c.lineTo(this.X(maxX), this.Y(100)); c.stroke();
          c.setLineDash([]);
          c.fillStyle = '#ef8f00';
          c.beginPath(); c.arc(this.X(kneeX), this.Y(kneeY), 5, 0, 2 * Math.PI); c.fill();
          label('knee ' + num(kneeX, 0) + ' IO/s at ' + num(kneeY, 0) + ' %', this.X(kneeX) - 6, this.Y(kneeY) - 6, 'right');
        }
        c.fillStyle = '#c62828';
        c.beginPath(); c.arc(this.X(maxX), this.Y(100), 5, 0, 2 * Math.PI); c.fill();
        // 100 % is the top of the plot: the label goes under the point
        label('max ~' + num(maxX, 0) + ' IO/s at 100 %', this.X(maxX) - 8, this.Y(100) + 16, 'right');
      } else if (fit.max_iops) {
        vline(fit.max_iops, 'max ~' + num(fit.max_iops, 0) + ' IO/s', [6, 4]);
      }
      if (fit.current_iops) vline(fit.current_iops, 'peak window ' + num(fit.current_iops, 0) + ' IO/s', [2, 3], true);
    } else {
      if (fit.typical_ms) hline(fit.typical_ms, 'typical for the profile ' + num(fit.typical_ms, 2) + ' ms', '#2ca02c');
      if (fit.design_ms) hline(fit.design_ms, 'design target ' + num(fit.design_ms, 2) + ' ms', '#c62828');
      if (fit.knee_iops) vline(fit.knee_iops, 'knee ' + num(fit.knee_iops, 0) + ' IO/s', [6, 4]);
      if (fit.max_iops) vline(fit.max_iops, 'max ~' + num(fit.max_iops, 0) + ' IO/s', [2, 3]);
    }
  };
  ScatterChart.prototype.bind = function () {
    var self = this;
    this.wrap.addEventListener('mousemove', function (ev) {
      var p = self.pos(ev), d = self.d, best = -1, bd = 100;
      if (!self.showPts) return;
      for (var i = 0; i < d.x.length; i++) {
        var dx = self.X(d.x[i]) - p.x, dy = self.Y(d.y[i]) - p.y, dd = dx * dx + dy * dy;
        if (dd < bd) { bd = dd; best = i; }
      }
      if (best < 0) { self.clearOverlay(); hideTip(); return; }
      var o = self.overlay();
      o.strokeStyle = '#111111'; o.lineWidth = 1.5;
      o.beginPath(); o.arc(self.X(d.x[best]), self.Y(d.y[best]), 6, 0, 2 * Math.PI); o.stroke();
      showTip(ev, [self.spec.title,
        { color: self.color, text: meta(self.spec.x).title + ': ' + fmt(self.spec.x, d.x[best]) },
        { color: self.color, text: meta(self.spec.y).title + ': ' + fmt(self.spec.y, d.y[best]) },
        d.n[best] > 1 ? d.n[best] + ' intervals in this pixel cell (highest shown)' : '1 interval']);
    });
    this.wrap.addEventListener('mouseleave', function () { self.clearOverlay(); hideTip(); });
  };

  // ---- read/write mix ----------------------------------------------------------------------
  function MixChart(fig, group, spec) {
    Plot.call(this, fig, 130);
    this.spec = spec;
    this.legend([{ label: 'read', color: COLORS.r_iops, fixed: true },
      { label: 'write', color: COLORS.w_iops, fixed: true },
      { label: 'discard', color: COLORS.d_iops, fixed: true }]);
    var self = this;
    this.wrap.addEventListener('mousemove', function (ev) {
      var p = self.pos(ev), row = self.rows.filter(function (r) { return p.y >= r.y && p.y <= r.y + r.h; })[0];
      if (!row) { hideTip(); return; }
      var names = ['reads', 'writes', 'discards'], lines = [row.label];
      row.vals.forEach(function (v, i) {
        if (v === null) return;
        lines.push({ color: [COLORS.r_iops, COLORS.w_iops, COLORS.d_iops][i],
          text: names[i] + ': ' + num(v, 0) + ' ' + row.unit + ' (' + num(row.total ? 100 * v / row.total : 0, 1) + ' %)' });
      });
      showTip(ev, lines);
    });
    this.wrap.addEventListener('mouseleave', hideTip);
  }
  MixChart.prototype = Object.create(Plot.prototype);
  MixChart.prototype.draw = function () {
    this.size();
    var c = this.ctx, d = this.spec.data, n = 0;
    c.clearRect(0, 0, this.w, this.h);
    var left = 110, width = this.w - left - 20;
    this.rows = [
      { label: 'operations', vals: d.ops, unit: 'ops', y: 14, h: 30 },
      { label: 'bytes', vals: d.kB.map(function (v) { return v === null ? null : v / 1024; }), unit: 'MB', y: 56, h: 30 }
    ];
    this.rows.forEach(function (r) {
      var total = 0;
      r.vals.forEach(function (v) { if (v) total += v; });
      r.total = total;
      c.font = '12px system-ui, sans-serif'; c.fillStyle = '#3a444d'; c.textAlign = 'right'; c.textBaseline = 'middle';
      c.fillText(r.label, left - 8, r.y + r.h / 2);
      if (!total) { c.textAlign = 'left'; c.fillText('not measured', left, r.y + r.h / 2); return; }
      var x = left;
      r.vals.forEach(function (v, i) {
        if (!v) return;
        var w = v / total * width;
        c.fillStyle = [COLORS.r_iops, COLORS.w_iops, COLORS.d_iops][i];
        c.fillRect(x, r.y, w, r.h);
        if (w > 60) {
          c.fillStyle = '#ffffff'; c.textAlign = 'center';
          c.fillText(num(100 * v / total, 1) + ' %', x + w / 2, r.y + r.h / 2);
        }
        x += w;
        n++;
      });
    });
    c.font = '11px system-ui, sans-serif'; c.fillStyle = '#5b6670'; c.textAlign = 'left'; c.textBaseline = 'top';
    var s = this.spec, extra = [];
    if (s.seq_pct !== null && s.seq_pct !== undefined) {
      extra.push('sequential share ' + num(s.seq_pct, 1) + ' %' + (s.seq_method ? ' (' + s.seq_method + ')' : ''));
    }
    if (s.read_pct !== null && s.read_pct !== undefined) extra.push('analysis: reads ' + num(s.read_pct, 1) + ' % of operations');
    c.fillText(extra.join(' \u00b7 '), left, 96);
    this.done(n);
  };

  // ---- request-size histogram --------------------------------------------------------------
  function HistChart(fig, group, spec) {
    Plot.call(this, fig, 200);
    this.spec = spec;
    this.keys = ['r', 'w'].filter(function (k) { return spec.data[k]; });
    this.on = { r: true, w: true };
    var self = this;
    this.legend(this.keys.map(function (k) {
      return { label: k === 'r' ? 'reads' : 'writes', color: k === 'r' ? COLORS.r_iops : COLORS.w_iops,
        on: function () { return self.on[k]; }, toggle: function () { self.on[k] = !self.on[k]; } };
    }));
    var e = spec.edges;
    this.labels = e.map(function (v, i) { return (i === 0 ? '\u2264' : '') + short(v); });
    this.labels.push('>' + short(e[e.length - 1]));
    this.wrap.addEventListener('mousemove', function (ev) {
      var p = self.pos(ev), nb = self.labels.length, bw = self.pw / nb, b = Math.floor((p.x - M.l) / bw);
      if (b < 0 || b >= nb) { hideTip(); return; }
      var lo = b === 0 ? 0 : e[b - 1], hi = b < e.length ? e[b] : null;
      var lines = [(hi === null ? '> ' + short(lo) : short(lo) + '\u2013' + short(hi)) + ' kB requests'];
      self.keys.forEach(function (k) {
        var arr = spec.data[k], tot = self.totals[k], v = arr[b] || 0;
        lines.push({ color: k === 'r' ? COLORS.r_iops : COLORS.w_iops,
          text: (k === 'r' ? 'reads: ' : 'writes: ') + num(v, 0) + ' ops (' + num(tot ? 100 * v / tot : 0, 1) + ' %)' });
      });
      showTip(ev, lines);
    });
    this.wrap.addEventListener('mouseleave', hideTip);
  }
  HistChart.prototype = Object.create(Plot.prototype);
  HistChart.prototype.draw = function () {
    this.size();
    var c = this.ctx, self = this, data = this.spec.data, nb = this.labels.length, n = 0;
    c.clearRect(0, 0, this.w, this.h);
    this.totals = {};
    var ymax = 0;
    this.keys.forEach(function (k) {
      var tot = 0;
      data[k].forEach(function (v) { tot += v || 0; });
      self.totals[k] = tot;
      if (!self.on[k] || !tot) return;
      data[k].forEach(function (v) { ymax = Math.max(ymax, 100 * (v || 0) / tot); });
    });
    var yt = niceTicks(Math.max(ymax, 1) * 1.04, 4);
    this.ymax = yt.max;
    this.yAxis(yt.ticks, yt.max, 'share of operations (%)');
    var bw = this.pw / nb, shown = this.keys.filter(function (k) { return self.on[k]; });
    c.textAlign = 'center'; c.textBaseline = 'top'; c.fillStyle = '#5b6670';
    this.labels.forEach(function (lb, b) { c.fillStyle = '#5b6670'; c.fillText(lb, M.l + bw * (b + 0.5), M.t + self.ph + 6); });
    c.textAlign = 'right'; c.textBaseline = 'top'; c.fillStyle = '#3a444d';
    c.fillText('request size (kB)', M.l + this.pw - 4, M.t + 4);
    shown.forEach(function (k, si) {
      var tot = self.totals[k];
      if (!tot) return;
      c.fillStyle = k === 'r' ? COLORS.r_iops : COLORS.w_iops;
      data[k].forEach(function (v, b) {
        if (!v) return;
        var h = 100 * v / tot / self.ymax * self.ph, w = bw * 0.8 / shown.length;
        c.fillRect(M.l + bw * b + bw * 0.1 + si * w, M.t + self.ph - h, w - 1, h);
        n++;
      });
    });
    this.frame();
    this.done(n);
  };

  // ---- RMF response-time breakdown ---------------------------------------------------------
  function StackChart(fig, group, spec) {
    Plot.call(this, fig, 220);
    this.spec = spec;
    var self = this;
    this.on = {};
    spec.parts.forEach(function (p) { self.on[p] = true; });
    this.legend(spec.parts.map(function (p) {
      return { label: meta(p).title, color: RMF_COLORS[p] || '#333333',
        on: function () { return self.on[p]; }, toggle: function () { self.on[p] = !self.on[p]; } };
    }));
    this.wrap.addEventListener('mousemove', function (ev) {
      var p = self.pos(ev), d = spec.data, nb = d.t.length, bw = self.pw / Math.max(1, nb);
      var b = Math.floor((p.x - M.l) / bw);
      if (b < 0 || b >= nb) { hideTip(); return; }
      var total = 0, lines = ['interval ending ' + fmtTime(d.t[b]) + ' (' + fmtDur(d.iv[b]) + ')'];
      spec.parts.forEach(function (k) {
        var v = d.parts[k][b];
        if (v !== null) total += v;
        lines.push({ color: RMF_COLORS[k], text: meta(k).title + ': ' + fmt(k, v) });
      });
      lines.push('response time: ' + num(total, 3) + ' ms');
      showTip(ev, lines);
    });
    this.wrap.addEventListener('mouseleave', hideTip);
  }
  StackChart.prototype = Object.create(Plot.prototype);
  StackChart.prototype.draw = function () {
    this.size();
    var c = this.ctx, self = this, d = this.spec.data, parts = this.spec.parts, nb = d.t.length, n = 0, i;
    c.clearRect(0, 0, this.w, this.h);
    var ymax = 0;
    for (i = 0; i < nb; i++) {
      var s = 0;
      parts.forEach(function (k) { if (self.on[k] && d.parts[k][i] !== null) s += d.parts[k][i]; });
      ymax = Math.max(ymax, s);
    }
    var yt = niceTicks(Math.max(ymax, 0.001) * 1.04, 4);
    this.ymax = yt.max;
    this.yAxis(yt.ticks, yt.max, 'response time (ms)', function (v) { return String(Number(v.toPrecision(3))); });
    var bw = this.pw / Math.max(1, nb), every = Math.max(1, Math.ceil(nb / Math.max(1, Math.floor(this.pw / 70))));
    for (i = 0; i < nb; i++) {
      var y = M.t + this.ph, any = false;
      for (var j = 0; j < parts.length; j++) {
        var k = parts[j], v = d.parts[k][i];
        if (!this.on[k] || v === null || v <= 0) { if (v !== null) any = true; continue; }
        var h = v / this.ymax * this.ph;
        c.fillStyle = RMF_COLORS[k] || '#333333';
        c.fillRect(M.l + bw * i + bw * 0.12, y - h, Math.max(1, bw * 0.76), h);
        y -= h;
        any = true;
      }
      if (any) n++;
      if (i % every === 0) {
        c.fillStyle = '#5b6670'; c.textAlign = 'center'; c.textBaseline = 'top'; c.font = '11px system-ui, sans-serif';
        c.fillText(tickText(d.t[i], 60), M.l + bw * (i + 0.5), M.t + this.ph + 6);
      }
    }
    this.frame();
    this.done(n);
  };

  // ---- wiring ------------------------------------------------------------------------------
  var KINDS = { ts: TimeChart, scatter: ScatterChart, mix: MixChart, hist: HistChart, stack: StackChart };
  var charts = [], groups = {};

  function addChart(group, spec) {
    var fig = document.getElementById(spec.el);
    if (!fig) { recordError('no element for chart ' + spec.el); return; }
    var Kind = KINDS[spec.type];
    if (!Kind) { recordError('unknown chart type ' + spec.type); return; }
    try {
      var ch = new Kind(fig, group, spec);
      charts.push(ch);
      if (spec.type === 'ts') group.charts.push(ch);
    } catch (e) {
      recordError(spec.el + ': ' + e.message);
    }
  }
  (DATA.devices || []).forEach(function (d, i) {
    var marks = d.marks || {};
    var group = { id: d.id, ts: d.ts || { t: [], series: {} }, view: null, hoverI: null, charts: [],
      marks: { worst: marks.worst || [], findings: marks.findings || [] }, misses: [] };
    groups[i] = group;
    (d.charts || []).forEach(function (spec) { addChart(group, spec); });
  });
  (DATA.guarantee || []).forEach(function (gd) {
    var group = { id: gd.id, ts: gd, view: null, hoverI: null, charts: [],
      marks: { worst: [], findings: [] }, misses: gd.misses || [] };
    (gd.charts || []).forEach(function (spec) {
      addChart(group, { el: spec.el, type: 'ts', title: spec.title, series: spec.series });
    });
  });

  var drawMs = 0;
  function now() { return (window.performance && performance.now()) || Date.now(); }
  function drawOne(ch) {
    var t0 = now();
    try {
      ch.draw();
    } catch (e) {
      recordError(ch.fig.id + ': ' + e.message);
    }
    drawMs += now() - t0;
  }
  function publish() {
    var ok = 0;
    charts.forEach(function (ch) { if (ch.points > 0) ok++; });
    body.dataset.chartsRendered = String(ok);
    body.dataset.chartsTotal = String(charts.length);
    body.dataset.renderMs = String(Math.round(drawMs));
  }
  function renderAll() {
    // read every width before drawing anything: interleaving reads and canvas resizes would
    // force one layout of the whole page per chart
    charts.forEach(function (ch) { ch.measure(); });
    charts.forEach(drawOne);
    publish();
  }
  // First the charts on (or near) the first screen, so the page is usable at once; then the
  // rest in slices of ~100 ms (each slice costs the browser a frame, so not smaller) so the
  // page stays responsive meanwhile.
  function progressive() {
    charts.forEach(function (ch) { ch.measure(); });
    charts.forEach(function (ch) { ch.presize(); });
    var near = [], later = [], limit = window.innerHeight * 1.5;
    charts.forEach(function (ch) {
      (ch.fig.getBoundingClientRect().top < limit ? near : later).push(ch);
    });
    near.forEach(drawOne);
    publish();
    body.dataset.ready = '1';
    body.dataset.readyMs = String(Math.round(now()));
    var i = 0;
    function slice() {
      var t0 = now();
      while (i < later.length && now() - t0 < 100) {
        if (!later[i].fig.dataset.rendered) drawOne(later[i]);
        i++;
      }
      if (i < later.length) {
        setTimeout(slice, 0);
      } else {
        publish();
        body.dataset.complete = '1';
        body.dataset.completeMs = String(Math.round(now()));
      }
    }
    setTimeout(slice, 0);
  }
  function redrawVisible() {
    charts.forEach(function (ch) { ch.measure(); });
    charts.forEach(function (ch) {
      if (ch.cw && ch.cw !== ch.w) {
        try { ch.draw(); } catch (e) { recordError(ch.fig.id + ': ' + e.message); }
      }
    });
  }

  // zoom links: a finding's window, a worst window
  document.addEventListener('click', function (ev) {
    var a = ev.target.closest ? ev.target.closest('[data-zoom-dev]') : null;
    if (!a) return;
    var g = groups[a.getAttribute('data-zoom-dev')];
    if (!g || !g.charts.length) return;
    var s = null, e = null;
    if (a.hasAttribute('data-zoom-finding')) {
      var j = Number(a.getAttribute('data-zoom-finding'));
      g.marks.findings.forEach(function (f) { if (f[0] === j) { s = f[1]; e = f[2]; } });
    } else {
      s = Number(a.getAttribute('data-zoom-start')) - BASE;
      e = Number(a.getAttribute('data-zoom-end')) - BASE;
    }
    if (s === null || e === null) return;
    var f = fullView(g), padS = Math.max((e - s) * 0.5, (g.ts.dt || 1) * 10);
    setView(g, [Math.max(f[0], s - padS), Math.min(f[1], e + padS)]);
  });

  // device filter, verdict filter, jump, local time, reset
  var filt = document.getElementById('dev-filter'), vf = document.getElementById('verdict-filter');
  function applyFilter() {
    var q = filt ? filt.value.trim().toLowerCase() : '', want = vf ? vf.value : '';
    var shown = {};
    document.querySelectorAll('section.device').forEach(function (sec) {
      var ok = (!q || (sec.dataset.key || '').toLowerCase().indexOf(q) >= 0) && (!want || sec.dataset.verdict === want);
      sec.hidden = !ok;
      shown[sec.dataset.dev] = ok;
    });
    document.querySelectorAll('table.verdicts tr[data-dev], article.finding[data-dev]').forEach(function (el) {
      el.hidden = !shown[el.dataset.dev];
    });
    redrawVisible();
  }
  if (filt) filt.addEventListener('input', applyFilter);
  if (vf) vf.addEventListener('change', applyFilter);
  var jump = document.getElementById('dev-jump');
  if (jump) {
    jump.addEventListener('change', function () {
      var el = document.getElementById('dev-d' + jump.value);
      if (el) { el.hidden = false; el.scrollIntoView(); redrawVisible(); }
    });
  }
  var lt = document.getElementById('local-time');
  if (lt) lt.addEventListener('change', function () { state.local = lt.checked; renderAll(); });
  var rz = document.getElementById('reset-zoom');
  if (rz) {
    rz.addEventListener('click', function () {
      Object.keys(groups).forEach(function (k) { groups[k].view = null; });
      charts.forEach(function (ch) { if (ch.group) ch.group.view = null; });
      renderAll();
    });
  }
  var sig = document.getElementById('cmp-only-sig');
  if (sig) {
    sig.addEventListener('change', function () {
      document.querySelectorAll('table.compare').forEach(function (t) { t.classList.toggle('only-sig', sig.checked); });
    });
  }

  var resizeTimer = null;
  window.addEventListener('resize', function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(redrawVisible, 150);
  });
  window.addEventListener('beforeprint', function () {
    state.dpr = Math.max(2, window.devicePixelRatio || 1);
    renderAll();
  });
  window.addEventListener('afterprint', function () {
    state.dpr = window.devicePixelRatio || 1;
    renderAll();
  });

  progressive();
})();
