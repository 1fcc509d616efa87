(function () {
  // Follow Airflow's colour mode (next-themes: a "dark" class on the UI's <html>, "theme" in localStorage).
  var root = document.documentElement;
  function own() {
    var t = null; try { t = localStorage.getItem("theme"); } catch (e) {}
    return t === "dark" || (t !== "light" && matchMedia("(prefers-color-scheme: dark)").matches);
  }
  function apply(dark) { root.classList.toggle("dark", dark); root.classList.toggle("light", !dark); }
  var host = null;
  try { if (window.parent !== window) host = window.parent.document.documentElement; } catch (e) {}
  if (host) {
    var sync = function () { apply(host.classList.contains("dark")); };
    sync(); new MutationObserver(sync).observe(host, {attributes: true, attributeFilter: ["class"]});
  } else {
    apply(own()); addEventListener("storage", function (e) { if (e.key === "theme") apply(own()); });
    matchMedia("(prefers-color-scheme: dark)").addEventListener("change", function () { apply(own()); });
  }
})();
function goAirflow(path) {
  // Airflow's iframe may not navigate the top window: move the UI's router instead.
  try {
    if (window.top !== window && window.top.location.origin === location.origin) {
      window.top.history.pushState({}, "", path);
      window.top.dispatchEvent(new PopStateEvent("popstate", {state: {}}));
      return false;
    }
  } catch (e) {}
  location.href = path; return false;
}
