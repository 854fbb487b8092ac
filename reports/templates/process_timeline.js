/* highwater report: the per-process timeline. reports/process_timeline.py embeds the bars in #ptl
   (data-meta: JSON; data-ops: base64 of variable-length integers, its docstring gives the format); this
   decodes them once and draws the visible part on a canvas: one lane per client process, each operation a
   bar from invoke to completion coloured by outcome, fault windows across all lanes. Hover / click a bar
   for its operation; drag pans, Ctrl + wheel and the buttons zoom; #op-<index> selects an operation.
   No network use. */
(function () {
  "use strict";
  var fig = document.getElementById("ptl");
  if (!fig) return;
  var info = document.getElementById("ptl-info");
  var meta = JSON.parse(fig.getAttribute("data-meta"));
  var raw = atob(fig.getAttribute("data-ops") || "");

  // --- decode ------------------------------------------------------------------------------------------
  var L = meta.lanes.length, R = meta.bars, NK = meta.keys.length, ERR = meta.keys.indexOf("error");
  var t0 = new Float64Array(R), t1 = new Float64Array(R), inv = new Float64Array(R), comp = new Float64Array(R);
  var code = new Int32Array(R), cnt = new Int32Array(R), vat = new Int32Array(R + 1), laneAt = new Int32Array(L + 1);
  var vals = [];
  var pos = 0;
  function uv() {  // arithmetic, not bit operations: values may pass 2^31
    var x = 0, mul = 1, b;
    do { b = raw.charCodeAt(pos++); x += (b & 127) * mul; mul *= 128; } while (b > 127);
    return x;
  }
  function zz() { var x = uv(); return x % 2 ? -(x + 1) / 2 : x / 2; }
  var r = 0;
  for (var l = 0; l < L; l++) {
    laneAt[l] = r;
    var n = uv(), pt = 0, pi = 0;
    for (var k = 0; k < n; k++, r++) {
      var c = uv(), a = pt + zz(), b = a + uv(), i = pi + zz(), d = uv(), open = (c & 3) === 3;
      code[r] = c; t0[r] = a; t1[r] = b; inv[r] = i; comp[r] = open ? -1 : i + d;
      pt = b; pi = open ? i : i + d;
      vat[r] = vals.length;
      if (c & 4) { cnt[r] = uv(); continue; }
      cnt[r] = 1;
      var mask = uv();
      for (var q = 0; q < NK; q++) if (mask & (1 << q)) vals.push(q, q === ERR ? uv() : zz());
    }
  }
  laneAt[L] = r; vat[R] = vals.length;
  if (r !== R || pos !== raw.length) {
    info.textContent = "The timeline data is damaged (" + r + " of " + R + " bars read).";
    return;
  }

  // --- geometry ----------------------------------------------------------------------------------------
  var GUT = 58, HEAD = 34, PADR = 10, MAXH = 480, MIN_SPAN = 20;
  var LH = Math.max(4, Math.min(18, Math.floor(MAXH / Math.max(L, 1))));
  var VH = Math.max(LH, Math.min(L * LH, MAXH)), H = HEAD + VH;
  var END = Math.max(meta.end, 1);
  var scroller = fig.querySelector(".ptl-scroll"), canvas = fig.querySelector("canvas");
  var ctx = canvas.getContext("2d");
  scroller.style.height = H + "px";
  fig.querySelector(".ptl-space").style.height = Math.max(0, L * LH - VH) + "px";
  var v0 = 0, v1 = END, W = 0, dpr = 1;
  var sel = -1, hov = -1, labels = [];
  function size() {
    W = scroller.clientWidth; dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
  }
  function plotW() { return Math.max(1, W - GUT - PADR); }
  function X(t) { return GUT + (t - v0) * plotW() / (v1 - v0); }
  function T(x) { return v0 + (x - GUT) * (v1 - v0) / plotW(); }
  function laneTop(l) { return HEAD + l * LH - scroller.scrollTop; }
  function laneOf(j) {
    var lo = 0, hi = L - 1;
    while (lo < hi) { var m = (lo + hi + 1) >> 1; if (laneAt[m] <= j) lo = m; else hi = m - 1; }
    return lo;
  }
  function firstEndingAfter(l, t) {  // bars of a lane never overlap: sorted by start and by end
    var lo = laneAt[l], hi = laneAt[l + 1];
    while (lo < hi) { var m = (lo + hi) >> 1; if (t1[m] < t) lo = m + 1; else hi = m; }
    return lo;
  }

  // --- colours -----------------------------------------------------------------------------------------
  var rootStyle = getComputedStyle(document.documentElement);
  function cssVar(name, fallback) { return rootStyle.getPropertyValue(name).trim() || fallback; }
  var COLOUR = [cssVar("--ok", "#2f9e5b"), cssVar("--fail", "#d9443b"), cssVar("--info", "#e39b20"),
                cssVar("--info", "#e39b20")];
  var ACCENT = cssVar("--accent", "#2f6fd0");
  var ALPHA = [1, 1, 1, 0.45];  // open (no completion): lighter; runs a little lighter too
  var faultColour = {};
  meta.faults.forEach(function (w) {
    if (!(w.fault in faultColour)) faultColour[w.fault] = cssVar("--f-" + w.fault, "#8a95a5");
  });

  // --- drawing -----------------------------------------------------------------------------------------
  function niceStep(span, n) {
    var raw = span / Math.max(1, n), p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function secs(us, digits) { return (us / 1e6).toFixed(digits); }

  function draw() {
    var began = performance.now();
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, W, H);
    ctx.font = "10.5px system-ui, sans-serif";
    ctx.textBaseline = "alphabetic";
    var top = scroller.scrollTop;
    var la = Math.max(0, Math.floor(top / LH)), lb = Math.min(L - 1, Math.floor((top + VH - 1) / LH));
    var l, y;
    ctx.fillStyle = "#f3f5f8";
    for (l = la; l <= lb; l++) if (l % 2) ctx.fillRect(0, laneTop(l), W, LH);
    // time grid and ticks
    var step = niceStep(v1 - v0, plotW() / 95), digits = Math.max(0, -Math.floor(Math.log10(step / 1e6)));
    ctx.fillStyle = "#5f6b7a"; ctx.textAlign = "center";
    for (var t = Math.ceil(v0 / step) * step; t <= v1; t += step) {
      var gx = Math.round(X(t)) + 0.5;
      ctx.fillRect(gx - 0.5, HEAD - 5, 1, 5);
      ctx.fillText(secs(t, digits), gx, HEAD - 8);
      ctx.fillStyle = "#e6eaef"; ctx.fillRect(gx - 0.5, HEAD, 1, VH); ctx.fillStyle = "#5f6b7a";
    }
    ctx.fillRect(GUT, HEAD - 1, W - GUT - PADR, 1);
    // fault windows: shaded across every lane, labelled on the top row
    ctx.save();
    ctx.beginPath(); ctx.rect(GUT, 0, W - GUT - PADR, H); ctx.clip();
    ctx.textAlign = "left"; ctx.font = "bold 10.5px system-ui, sans-serif";
    labels = [];
    var labelEnd = -1e9;
    meta.faults.forEach(function (w, n) {
      var x0 = X(w.start), x1 = Math.max(X(w.stop), x0 + 1.5);
      if (x1 < GUT || x0 > W - PADR) return;
      ctx.fillStyle = faultColour[w.fault];
      ctx.globalAlpha = 0.14; ctx.fillRect(x0, HEAD, x1 - x0, VH);
      ctx.globalAlpha = 0.8; ctx.fillRect(x0, 14, x1 - x0, 3);
      ctx.globalAlpha = 1;
      var lx = Math.max(x0, GUT), tw = ctx.measureText(w.label).width;
      labels.push({x0: Math.max(x0, GUT), x1: Math.max(x1, lx + tw), n: n});
      if (lx > labelEnd + 6) { ctx.fillText(w.label, lx, 11); labelEnd = lx + tw; }
    });
    ctx.restore();
    // bars, neighbours of one style that touch on screen drawn as one rectangle
    ctx.save();
    ctx.beginPath(); ctx.rect(GUT, HEAD, W - GUT - PADR + 1, VH); ctx.clip();
    if (sel >= 0) {  // a dashed line through every lane, under the bars: the selection at any zoom
      var gx = Math.round(X((t0[sel] + t1[sel]) / 2)) + 0.5;
      ctx.strokeStyle = ACCENT; ctx.lineWidth = 1; ctx.setLineDash([3, 3]);
      ctx.beginPath(); ctx.moveTo(gx, HEAD); ctx.lineTo(gx, H); ctx.stroke(); ctx.setLineDash([]);
    }
    var bh = LH > 6 ? LH - 4 : LH - 1, style = -1, px0 = 0, px1 = 0;
    function flush() {
      if (style < 0) return;
      ctx.fillStyle = COLOUR[style & 3]; ctx.globalAlpha = ALPHA[style & 3] * (style & 4 ? 0.75 : 1);
      ctx.fillRect(px0, y, px1 - px0, bh);
      style = -1;
    }
    for (l = la; l <= lb; l++) {
      y = Math.floor(laneTop(l) + (LH - bh) / 2);
      var end = laneAt[l + 1];
      for (var j = firstEndingAfter(l, v0); j < end && t0[j] <= v1; j++) {
        var s = code[j] & 7, a = Math.round(X(t0[j])), b = Math.max(Math.round(X(t1[j])), a + 1);
        if (s === style && a <= px1) { if (b > px1) px1 = b; continue; }
        flush(); style = s; px0 = a; px1 = b;
      }
      flush();
    }
    ctx.globalAlpha = 1;
    outline(hov, "#1d2430", 1);
    outline(sel, ACCENT, 2);
    ctx.restore();
    // lane names: every lane when they are tall enough, else every k-th
    ctx.save();
    ctx.beginPath(); ctx.rect(0, HEAD, GUT, VH); ctx.clip();
    ctx.fillStyle = "#5f6b7a"; ctx.textAlign = "right"; ctx.textBaseline = "middle"; ctx.font = "10.5px system-ui, sans-serif";
    var every = Math.max(1, Math.ceil(12 / LH));
    for (l = la; l <= lb; l++) if (l % every === 0) ctx.fillText(String(meta.lanes[l]), GUT - 6, laneTop(l) + LH / 2);
    ctx.restore();
    ctx.fillStyle = "#5f6b7a"; ctx.textAlign = "right"; ctx.fillText("process", GUT - 6, HEAD - 8);
    rangeText();
    var now = performance.now();
    fig.dataset.lastDrawMs = (now - began).toFixed(1);
    if (!fig.dataset.drawn) { fig.dataset.drawn = "1"; fig.dataset.drawMs = now.toFixed(1); }
  }
  function outline(j, colour, width) {
    if (j < 0) return;
    var l = laneOf(j), a = Math.round(X(t0[j])), b = Math.max(Math.round(X(t1[j])), a + 1), yy = laneTop(l) + 1;
    ctx.strokeStyle = colour; ctx.lineWidth = width;
    ctx.strokeRect(a - width / 2 - 1, yy - width / 2, b - a + width + 2, LH - 2 + width);
  }
  var pending = false;
  function redraw() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; draw(); });
  }
  var range = document.querySelector(".ptl-range");
  function rangeText() {
    if (!range) return;
    range.textContent = (v0 <= 0 && v1 >= END) ? "the whole run, " + secs(END, 2) + " s" :
      "showing " + secs(v0, 3) + "–" + secs(v1, 3) + " s of " + secs(END, 2) + " s";
  }

  // --- the operation under the pointer ---------------------------------------------------------------
  function hit(x, yy) {
    if (yy < HEAD || x < GUT || x > W - PADR + 4) return -1;
    var l = Math.floor((yy - HEAD + scroller.scrollTop) / LH);
    if (l < 0 || l >= L) return -1;
    var t = T(x), tol = 3 * (v1 - v0) / plotW(), best = -1, bd = Infinity;
    for (var j = firstEndingAfter(l, t - tol), end = laneAt[l + 1]; j < end && t0[j] <= t + tol; j++) {
      var dist = t < t0[j] ? t0[j] - t : t > t1[j] ? t - t1[j] : 0;
      if (dist < bd) { bd = dist; best = j; }
    }
    return best;
  }
  function span(text, cls) {
    var e = document.createElement("span");
    if (cls) e.className = cls;
    e.textContent = text;
    return e;
  }
  function indexLink(i) {
    var target = document.getElementById("h-" + i);
    if (!target) return span("#" + i);
    var a = document.createElement("a");
    a.href = "#h-" + i; a.textContent = "#" + i; a.title = "this entry in the history excerpt";
    return a;
  }
  function dur(us) {
    return us < 1000 ? us + " µs" : us < 1e6 ? (us / 1000).toPrecision(3) + " ms" : (us / 1e6).toPrecision(4) + " s";
  }
  var TYPES = ["ok", "fail", "info", "info"];
  function show(j) {
    info.textContent = "";
    if (j < 0) { info.appendChild(span(sel < 0 ? "Hover or click a bar to see its operation." : "")); return; }
    var c = code[j], typ = c & 3, f = meta.fs[c >> 3], lane = meta.lanes[laneOf(j)];
    var head = [span("process " + lane), span(" · "), span(cnt[j] > 1 ? cnt[j] + " " + TYPES[typ] + " operations" +
      (f === "*" ? " of several kinds" : " (" + f + ")") : f), span(" · ")];
    if (cnt[j] === 1) head.push(span(TYPES[typ], "typ " + TYPES[typ]), span(typ === 3 ? " (no completion: open to the end)" : ""), span(" · "));
    head.forEach(function (e) { info.appendChild(e); });
    info.appendChild(span(cnt[j] > 1 ? "history " : "invoke "));
    info.appendChild(indexLink(inv[j]));
    if (comp[j] >= 0) { info.appendChild(span(cnt[j] > 1 ? " … " : " → complete ")); info.appendChild(indexLink(comp[j])); }
    info.appendChild(span("\n" + secs(t0[j], 6) + " s → " + (typ === 3 ? "end of history " : "") + secs(t1[j], 6) +
      " s (" + dur(t1[j] - t0[j]) + ")"));
    if (cnt[j] > 1) {
      info.appendChild(span("\ndrawn as one bar: neighbouring operations of this process with the same outcome in one " +
        dur(meta.slot_us) + " slot; their values are in history.jsonl (indexes between these two)"));
      return;
    }
    var parts = [];
    for (var q = vat[j]; q < vat[j + 1]; q += 2) {
      var key = meta.keys[vals[q]], v = vals[q + 1];
      parts.push(key === "error" ? "error " + meta.errors[v] : key === "records" ? v + " records" : key + " " + v);
    }
    info.appendChild(span("\nvalue: " + (parts.length ? parts.join(", ") : "—")));
  }
  function showFault(n) {
    var w = meta.faults[n];
    info.textContent = "";
    info.appendChild(span("fault " + w.label + ": " + secs(w.start, 3) + " s → " + (w.open ? "end (never stopped)" : secs(w.stop, 3) + " s") +
      (w.detail ? " — " + w.detail : "") + " "));
    if (w.anchor) {
      var a = document.createElement("a");
      a.href = "#" + w.anchor; a.textContent = "in the fault list";
      info.appendChild(a);
    }
  }
  function faultAt(x, yy) {
    if (yy >= HEAD - 14) return -1;
    for (var k = labels.length - 1; k >= 0; k--) if (x >= labels[k].x0 && x <= labels[k].x1) return labels[k].n;
    return -1;
  }

  // --- interaction -------------------------------------------------------------------------------------
  function local(e) { var b = canvas.getBoundingClientRect(); return [e.clientX - b.left, e.clientY - b.top]; }
  var drag = null;
  canvas.addEventListener("mousedown", function (e) {
    if (e.button !== 0) return;
    var p = local(e);
    drag = {x: p[0], y: p[1], v0: v0, v1: v1, moved: false};
    e.preventDefault();
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var p = local(e), dx = p[0] - drag.x;
    if (Math.abs(dx) > 3) drag.moved = true;
    if (!drag.moved) return;
    canvas.classList.add("grab");
    var shift = dx * (drag.v1 - drag.v0) / plotW();
    setView(drag.v0 - shift, drag.v1 - shift);
  });
  window.addEventListener("mouseup", function (e) {
    if (!drag) return;
    var d = drag;
    drag = null;
    canvas.classList.remove("grab");
    if (d.moved) return;
    var p = local(e), n = faultAt(p[0], p[1]);
    if (n >= 0) { if (meta.faults[n].anchor) location.hash = "#" + meta.faults[n].anchor; return; }
    select(hit(p[0], p[1]));
  });
  canvas.addEventListener("mousemove", function (e) {
    if (drag) return;
    var p = local(e), n = faultAt(p[0], p[1]), j = n >= 0 ? -1 : hit(p[0], p[1]);
    canvas.style.cursor = n >= 0 || j >= 0 ? "pointer" : "";
    if (j !== hov) { hov = j; redraw(); }
    if (n >= 0) showFault(n); else show(j >= 0 ? j : sel);
  });
  canvas.addEventListener("mouseleave", function () { if (hov >= 0) { hov = -1; redraw(); } show(sel); });
  canvas.addEventListener("wheel", function (e) {
    if (!e.ctrlKey && !e.metaKey) return;  // a plain wheel scrolls the lanes or the page
    e.preventDefault();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, T(local(e)[0]));
  }, {passive: false});
  scroller.addEventListener("scroll", redraw);
  window.addEventListener("resize", function () { size(); redraw(); });
  document.querySelectorAll(".ptl-tools button").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var z = btn.getAttribute("data-zoom");
      if (z === "all") setView(0, END); else zoom(z === "in" ? 0.5 : 2, (v0 + v1) / 2);
    });
  });
  function setView(a, b) {
    var w = Math.min(Math.max(b - a, MIN_SPAN), END);
    if (a < 0) a = 0;
    if (a + w > END) a = END - w;
    v0 = a; v1 = a + w;
    rangeText();
    redraw();
  }
  function zoom(factor, at) {
    var w = Math.min(Math.max((v1 - v0) * factor, MIN_SPAN), END);
    setView(at - (at - v0) * w / (v1 - v0), at - (at - v0) * w / (v1 - v0) + w);
  }
  function select(j) {
    sel = j;
    if (j >= 0) fig.dataset.selected = String(cnt[j] > 1 ? inv[j] : (comp[j] >= 0 ? comp[j] : inv[j]));
    else delete fig.dataset.selected;
    show(j); redraw();
  }

  // --- #op-<index> links -------------------------------------------------------------------------------
  function find(index) {
    for (var j = 0; j < R; j++) if (cnt[j] === 1 && (inv[j] === index || comp[j] === index)) return j;
    return -1;
  }
  function goToOp(index) {
    fig.scrollIntoView({block: "center"});
    var j = find(index);
    if (j < 0) {
      sel = -1; delete fig.dataset.selected; redraw();
      info.textContent = "History entry #" + index + " is not a client operation with its own bar on this timeline.";
      return;
    }
    var w = Math.min(END, Math.max((t1[j] - t0[j]) * 10, END / 400, 1000)), mid = (t0[j] + t1[j]) / 2;
    v0 = 0; v1 = END;
    setView(mid - w / 2, mid + w / 2);
    scroller.scrollTop = Math.max(0, laneOf(j) * LH - VH / 2 + LH / 2);
    select(j);
    fig.dataset.selected = String(index);
  }
  function fromHash() {
    var m = /^#op-(\d+)$/.exec(location.hash);
    if (m) goToOp(Number(m[1]));
  }
  window.addEventListener("hashchange", fromHash);

  // for the browser tests and the benchmark: where an operation's bar is, in viewport pixels
  fig.ptl = {
    lanes: meta.lanes.slice(),
    box: function (index, lane) {  // lane: also look inside that lane's runs
      var j = find(index);
      if (j < 0 && lane !== undefined) {
        for (var q = laneAt[lane]; q < laneAt[lane + 1]; q++) if (inv[q] <= index && index <= comp[q]) { j = q; break; }
      }
      if (j < 0) return null;
      var b = canvas.getBoundingClientRect(), a = Math.round(X(t0[j])), e = Math.max(Math.round(X(t1[j])), a + 1);
      return {x: b.left + (a + e) / 2, y: b.top + laneTop(laneOf(j)) + LH / 2, width: e - a, lane: laneOf(j)};
    },
    laneY: function (l) { return laneTop(l) + LH / 2; },
    view: function () { return [v0, v1, END]; }
  };
  fig.dataset.lanes = String(L);
  size();
  draw();
  show(-1);
  fromHash();
})();
