// Runs hexamer/data/view/tracks.js under Node with a stand-in for igv.js's TrackBase and a canvas
// that records what is drawn; reads a list of cases on stdin, writes what each track did on stdout.
const fs = require("fs");
const vm = require("vm");

const registry = {};
const notes = {};
class TrackBase {
  constructor(config, browser) {
    this.config = config;
    this.browser = browser;
    this.name = config.name;
    this.height = config.height || 50;
  }
}
const sandbox = { igv: { TrackBase, registerTrackClass: (n, c) => { registry[n] = c; } }, window: { hexamerNote: (n, v) => { notes[n] = v; } } };
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), sandbox);

function canvas() {
  const ops = [];
  return {
    ops, fillStyle: "", font: "", textAlign: "", textBaseline: "",
    fillRect(x, y, w, h) { ops.push({ x, y, w, h, fill: this.fillStyle }); },
    measureText() { return {}; },  // no glyph metrics: letters fall back to bars
    save() {}, restore() {}, translate() {}, scale() {}, fillText() {},
  };
}

async function run(c) {
  const members = (c.members || []).map((features) => ({ getFeatures: async () => features }));
  let next = 0;
  const browser = {
    genome: { getChromosomeName: (n) => n.replace(/^chr/, "") },
    nucleotideColors: { A: "green", C: "blue", G: "orange", T: "red" },
    createTrack: async () => members[next++],
  };
  const track = new registry[c.type](c.config, browser);
  await track.postInit();
  const features = await track.getFeatures(c.chr, 0, 1000, c.bpPerPixel);
  const ctx = canvas();
  track.draw({ context: ctx, features, bpStart: 0, bpPerPixel: c.bpPerPixel, pixelWidth: 100, pixelHeight: c.config.height });
  const viewport = { cachedFeatures: features };
  const popups = (c.clicks || []).map((k) => track.popupData({ viewport, genomicLocation: k[0], y: k[1] }));
  return { features, rects: ctx.ops, popups, note: notes[c.config.name] };
}

(async () => {
  const cases = JSON.parse(fs.readFileSync(0, "utf8"));
  const out = [];
  for (const c of cases) out.push(await run(c));
  process.stdout.write(JSON.stringify({ registered: Object.keys(registry), results: out }));
})();
