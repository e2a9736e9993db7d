// hexamer's own igv.js track types, registered before the browser is made:
//   "hexamerlogo": the four prob_A..prob_T bigWigs of one run as one stacked track, read through
//     igv.js's own bigWig reader (a wig track per base, never shown alone); per position the four
//     probabilities stacked, largest on top, as letters when a base is wide enough, else as bars.
//   "hexamerism": an ISM table as a heat-map, rows = alternative base A C G T, columns =
//     positions, diverging colours centred on 0 (RdBu, as hexamer ism --plot draws it); the
//     reference base's cell is grey; click or hover a cell for its value.
// What each drew is noted in the page's status (window.hexamerNote), for people and tests.
(function () {
  var BASES = ["A", "C", "G", "T"];
  // ColorBrewer RdBu (5 classes): -1 red ... 0 near-white ... +1 blue
  var STOPS = [[178, 24, 43], [244, 165, 130], [247, 247, 247], [146, 197, 222], [33, 102, 172]];

  function note(name, value) { if (window.hexamerNote) window.hexamerNote(name, value); }

  function baseColour(track, base) {
    var c = track.browser && track.browser.nucleotideColors;
    return (c && c[base]) || track.config.colors[base];
  }

  function diverging(value, span) {
    var t = Math.max(-1, Math.min(1, value / span)) * 2 + 2;  // 0..4 along the stops
    var i = Math.min(3, Math.floor(t)), f = t - i, a = STOPS[i], b = STOPS[i + 1];
    return "rgb(" + [0, 1, 2].map(function (k) { return Math.round(a[k] + (b[k] - a[k]) * f); }).join(",") + ")";
  }

  // The four sorted feature lists cut into segments over which each list has one value (null: none).
  function mergeSeries(arrays) {
    var at = arrays.map(function () { return 0; }), out = [];
    var pos = Math.min.apply(null, arrays.map(function (a) { return a.length ? a[0].start : Infinity; }));
    while (pos < Infinity) {
      var next = Infinity, values = [], any = false;
      for (var k = 0; k < arrays.length; k++) {
        var a = arrays[k];
        while (at[k] < a.length && a[at[k]].end <= pos) at[k]++;
        var f = a[at[k]];
        if (f && f.start <= pos) {
          values.push(Number.isFinite(f.value) ? f.value : null);
          any = any || Number.isFinite(f.value);
          next = Math.min(next, f.end);
        } else {
          values.push(null);
          if (f) next = Math.min(next, f.start);
        }
      }
      if (any) out.push({ start: pos, end: next, values: values });
      pos = next;
    }
    return out;
  }

  var glyphs = {};
  function drawLetter(ctx, letter, x, y, w, h) {
    var m = glyphs[letter];
    if (m === undefined) {
      ctx.font = "bold 100px sans-serif";
      var t = ctx.measureText(letter);
      m = glyphs[letter] = t.actualBoundingBoxAscent ? t : null;
    }
    if (!m) return false;
    var gw = m.actualBoundingBoxLeft + m.actualBoundingBoxRight, gh = m.actualBoundingBoxAscent + m.actualBoundingBoxDescent;
    ctx.save();
    ctx.font = "bold 100px sans-serif";
    ctx.translate(x, y + h);
    ctx.scale(w / gw, h / gh);
    ctx.fillText(letter, m.actualBoundingBoxLeft, -m.actualBoundingBoxDescent);
    ctx.restore();
    return true;
  }

  function at(features, position) {  // the feature holding position (features sorted by start)
    var lo = 0, hi = features.length - 1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1, f = features[mid];
      if (position < f.start) hi = mid - 1;
      else if (position >= f.end) lo = mid + 1;
      else return f;
    }
    return undefined;
  }

  function fmt(v) { return v === null || v === undefined ? "no value" : Number(v).toPrecision(4); }

  class LogoTrack extends igv.TrackBase {
    constructor(config, browser) {
      super(config, browser);
      this.type = "hexamerlogo";
      this.featureType = "numeric";
      this.autoscale = false;
    }

    async postInit() {
      this.members = [];
      for (var i = 0; i < this.config.tracks.length; i++) {
        var conf = Object.assign({ isMergedTrack: true }, this.config.tracks[i]);
        var t = await this.browser.createTrack(conf);
        if (typeof t.postInit === "function") await t.postInit();
        this.members.push(t);
      }
      this.resolutionAware = this.members.some(function (t) { return t.resolutionAware; });
      return this;
    }

    get supportsWholeGenome() { return false; }

    async getFeatures(chr, start, end, bpPerPixel) {
      var lists = await Promise.all(this.members.map(function (t) { return t.getFeatures(chr, start, end, bpPerPixel); }));
      return mergeSeries(lists.map(function (l) { return l || []; }));
    }

    draw(options) {
      var ctx = options.context, h = options.pixelHeight, bpp = options.bpPerPixel, bpStart = options.bpStart;
      var letters = 1 / bpp >= 6, drawn = 0, first = null, self = this;
      var bpEnd = bpStart + options.pixelWidth * bpp + 1;
      options.features.forEach(function (f) {
        if (f.end < bpStart || f.start > bpEnd) return;
        var x = Math.floor((f.start - bpStart) / bpp), w = Math.max(1, Math.ceil((f.end - bpStart) / bpp) - x);
        var order = [0, 1, 2, 3].filter(function (k) { return f.values[k] !== null && f.values[k] > 0; });
        order.sort(function (a, b) { return f.values[a] - f.values[b]; });  // largest on top
        var y = h;
        order.forEach(function (k) {
          var bh = Math.min(y, f.values[k] * h);
          y -= bh;
          ctx.fillStyle = baseColour(self, BASES[k]);
          if (!(letters && bh >= 1 && drawLetter(ctx, BASES[k], x + 0.5, y, w - 1, bh))) ctx.fillRect(x, y, w, bh);
        });
        drawn += 1;
        if (first === null) first = { start: f.start, end: f.end, values: f.values };
      });
      note(this.name, { kind: "logo", positions: drawn, letters: letters, first: first });
    }

    paintAxis(ctx, width, height) {
      ctx.fillStyle = "rgb(80,80,80)";
      ctx.font = "10px sans-serif";
      ctx.textAlign = "right";
      ctx.fillText("1", width - 4, 10);
      ctx.fillText("0", width - 4, height - 2);
    }

    popupData(clickState) {
      var f = at(clickState.viewport.cachedFeatures || [], Math.floor(clickState.genomicLocation));
      if (!f) return [];
      var out = [{ name: "Position", value: (f.start + 1).toLocaleString() + (f.end - f.start > 1 ? "-" + f.end.toLocaleString() : "") }];
      BASES.forEach(function (b, k) { out.push({ name: "P(" + b + ")", value: fmt(f.values[k]) }); });
      return out;
    }

    menuItemList() { return []; }
  }

  class IsmTrack extends igv.TrackBase {
    constructor(config, browser) {
      super(config, browser);
      this.type = "hexamerism";
      this.span = config.span || 1;
      this.byChr = {};
      var self = this;
      (config.features || []).forEach(function (f) { (self.byChr[f.chr] = self.byChr[f.chr] || []).push(f); });
      Object.keys(this.byChr).forEach(function (c) { self.byChr[c].sort(function (a, b) { return a.start - b.start; }); });
    }

    async postInit() {  // the table's contig names as the genome spells them (chr20 = 20)
      var genome = this.browser.genome, byChr = {}, self = this;
      Object.keys(this.byChr).forEach(function (c) {
        var name = genome && genome.getChromosomeName ? genome.getChromosomeName(c) : c;
        byChr[name] = (byChr[name] || []).concat(self.byChr[c]);
      });
      this.byChr = byChr;
      return this;
    }

    get supportsWholeGenome() { return false; }

    async getFeatures(chr, start, end) {
      return (this.byChr[chr] || []).filter(function (f) { return f.end > start && f.start < end; });
    }

    draw(options) {
      var ctx = options.context, bpp = options.bpPerPixel, bpStart = options.bpStart;
      var rowH = options.pixelHeight / 4, cells = 0, first = null, span = this.span;
      var bpEnd = bpStart + options.pixelWidth * bpp + 1;
      options.features.forEach(function (f) {
        if (f.end < bpStart || f.start > bpEnd) return;
        var x = Math.floor((f.start - bpStart) / bpp), w = Math.max(1, Math.ceil((f.end - bpStart) / bpp) - x);
        BASES.forEach(function (b, k) {
          var v = f.scores[b];
          if (v === undefined) {
            ctx.fillStyle = b === f.ref ? "rgb(189,189,189)" : "rgb(255,255,255)";
          } else {
            ctx.fillStyle = diverging(v, span);
            cells += 1;
            if (first === null) first = { start: f.start, alt: b, value: v };
          }
          ctx.fillRect(x, k * rowH, w, Math.ceil(rowH));
        });
      });
      note(this.name, { kind: "ism", cells: cells, span: span, first: first });
    }

    paintAxis(ctx, width, height) {
      var rowH = height / 4, self = this;
      ctx.font = "bold 10px sans-serif";
      ctx.textAlign = "right";
      ctx.textBaseline = "middle";
      BASES.forEach(function (b, k) {
        ctx.fillStyle = baseColour(self, b);
        ctx.fillText(b, width - 4, (k + 0.5) * rowH);
      });
    }

    cellAt(clickState) {
      var f = at(clickState.viewport.cachedFeatures || [], Math.floor(clickState.genomicLocation));
      var row = Math.floor(clickState.y / (this.height / 4));
      return f && row >= 0 && row < 4 ? { f: f, alt: BASES[row] } : undefined;
    }

    popupData(clickState) {
      var c = this.cellAt(clickState);
      if (!c) return [];
      var v = c.f.scores[c.alt];
      return [
        { name: "Position", value: c.f.chr + ":" + (c.f.start + 1).toLocaleString() },
        { name: "SNV", value: c.f.ref + ">" + c.alt },
        { name: "RawScore", value: c.alt === c.f.ref ? "reference base" : fmt(v) },
        { name: "Colour scale", value: "red -" + fmt(this.span) + " ... 0 ... +" + fmt(this.span) + " blue" },
      ];
    }

    hoverText(clickState) {
      var c = this.cellAt(clickState);
      if (!c || c.f.scores[c.alt] === undefined) return undefined;
      return c.f.ref + ">" + c.alt + " " + fmt(c.f.scores[c.alt]);
    }

    menuItemList() { return []; }
  }

  igv.registerTrackClass("hexamerlogo", LogoTrack);
  igv.registerTrackClass("hexamerism", IsmTrack);
})();
