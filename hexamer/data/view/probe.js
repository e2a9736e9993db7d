// What the page saw, for people and for tests: console errors, uncaught errors, and any request
// that left this page's origin (there should be none: everything is local or embedded).
(function () {
  var status = { ready: false, tracks: [], errors: [], offsite: [], notes: {}, dom: [] };
  window.hexamerStatus = status;
  var origError = console.error;
  console.error = function () {
    status.errors.push(Array.prototype.map.call(arguments, String).join(" "));
    return origError.apply(console, arguments);
  };
  window.addEventListener("error", function (e) { status.errors.push(String(e.message)); });
  window.addEventListener("unhandledrejection", function (e) { status.errors.push(String(e.reason)); });
  function local(url) {
    var s = String(url && url.url ? url.url : url);
    if (/^(data|blob):/.test(s)) return true;
    try { return new URL(s, location.href).origin === location.origin || location.protocol === "file:" && /^file:/.test(new URL(s, location.href).href); }
    catch (e) { return false; }
  }
  var origFetch = window.fetch;
  window.fetch = function (url) {
    if (!local(url)) status.offsite.push(String(url && url.url ? url.url : url));
    return origFetch.apply(this, arguments);
  };
  var origOpen = XMLHttpRequest.prototype.open;
  XMLHttpRequest.prototype.open = function (method, url) {
    if (!local(url)) status.offsite.push(String(url));
    return origOpen.apply(this, arguments);
  };
  function render() {
    var el = document.getElementById("hexamer-status");
    if (el) el.textContent = JSON.stringify(status);
  }
  // what a track drew (hexamer's own track types report it), kept per track name
  window.hexamerNote = function (name, value) { status.notes[name] = value; render(); };
  // the tracks as the DOM holds them: label text and whether a drawn canvas is in the page
  function domTracks(browser) {
    return browser.trackViews.map(function (tv) {
      var vp = tv.viewports && tv.viewports[0], canvas = vp && vp.canvas;
      var label = vp && vp.viewportElement && vp.viewportElement.querySelector(".igv-track-label");
      return { name: tv.track.name || tv.track.id, type: tv.track.type, label: label ? label.textContent : null,
               canvas: !!(canvas && canvas.isConnected && canvas.width > 0) };
    });
  }
  window.hexamerPublish = function (browser) {
    status.ready = true;
    status.ms = Math.round(performance.now());  // from navigation start to igv.js drawn
    status.tracks = browser.findTracks(function () { return true; }).map(function (t) { return t.name || t.type; });
    status.dom = domTracks(browser);
    render();
    document.body.setAttribute("data-igv-ready", "1");
    setTimeout(function () { status.dom = domTracks(browser); render(); }, 2000);  // after the last repaint
  };
  window.hexamerFail = function (error) {
    status.errors.push(String(error && error.stack || error));
    render();
  };
})();
