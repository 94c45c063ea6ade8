// precompile_nb graph explorer: lays out the captured graph in the browser with the vendored
// Graphviz (window.__pcnbViz, viz-global.js), and wires search, expand/collapse of module
// clusters and the node <-> kernel links. Runs in a static page and in a notebook output; it
// needs no kernel and no network. Loaded once per page (window.__pcnbGX); each graph block
// calls __pcnbGX.wire(root) with its root element (div.pcnb-gx).
(function () {
  "use strict";
  if (window.__pcnbGX) return;

  var GX = {};
  window.__pcnbGX = GX;

  function viz() {
    if (!window.__pcnbVizInstance) {
      if (!window.__pcnbViz) return Promise.reject(new Error("the Graphviz renderer is missing"));
      window.__pcnbVizInstance = window.__pcnbViz.instance();
    }
    return window.__pcnbVizInstance;
  }

  // ---- module paths (graph.py _split_path: dots inside [...] do not split)
  function splitPath(path) {
    if (!path) return [];
    var parts = [], depth = 0, cur = "";
    for (var i = 0; i < path.length; i++) {
      var ch = path[i];
      if (ch === "[") depth++;
      else if (ch === "]") depth = Math.max(depth - 1, 0);
      if (ch === "." && depth === 0) { parts.push(cur); cur = ""; } else cur += ch;
    }
    parts.push(cur);
    var out = [];
    for (var k = 1; k <= parts.length; k++) out.push(parts.slice(0, k).join("."));
    return out;
  }

  function q(s) {
    return '"' + String(s).replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n") + '"';
  }

  function esc(s) {
    return String(s == null ? "" : s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }

  // ---- the model of one graph block
  function Graph(root, data) {
    this.root = root;
    this.data = data;
    this.nodes = data.nodes;
    this.kernels = data.kernels;
    this.byName = {};
    this.direct = {"": []};
    this.children = {"": []};
    this.count = {"": 0};
    for (var i = 0; i < this.nodes.length; i++) {
      var n = this.nodes[i];
      n.i = i;
      this.byName[n.name] = n;
      var chain = [""].concat(splitPath(n.module || ""));
      for (var c = 1; c < chain.length; c++) {
        if (!(chain[c] in this.children)) {
          this.children[chain[c]] = [];
          this.direct[chain[c]] = [];
          this.count[chain[c]] = 0;
          this.children[chain[c - 1]].push(chain[c]);
        }
      }
      for (var p = 0; p < chain.length; p++) this.count[chain[p]]++;
      this.direct[n.module || ""].push(n);
      n.kernels = [];
      n.hay = [n.name, n.target, n.module, n.shape, n.dtype, n.role].join(" ").toLowerCase();
    }
    for (var k = 0; k < this.kernels.length; k++) {
      var kern = this.kernels[k];
      kern.i = k;
      for (var j = 0; j < kern.nodes.length; j++) {
        var node = this.byName[kern.nodes[j]];
        if (node) { node.kernels.push(k); node.hay += " " + kern.name.toLowerCase(); }
      }
    }
    this.budget = data.budget || 400;
    this.pinned = {};  // modules the user opened (and the ones holding what was asked for)
    this.closed = {};  // modules the user closed
    this.opened = {};
    var self = this;
    (data.opened || []).forEach(function (p) { self.opened[p] = true; });
  }

  // graph.py _plan (Note [collapsing big graphs]): pinned modules open, closed ones shut, then
  // the biggest collapsed module whose contents still fit the budget opens, again and again
  Graph.prototype.plan = function () {
    var self = this, opened = {"": true};
    function cost(p) { return self.direct[p].length + self.children[p].length - 1; }
    var drawn = this.direct[""].length + this.children[""].length;
    Object.keys(this.pinned).sort(function (a, b) { return splitPath(a).length - splitPath(b).length; })
      .forEach(function (path) {
        splitPath(path).forEach(function (p) {
          if (p in self.children && !opened[p]) { opened[p] = true; drawn += cost(p); }
        });
      });
    var heap = [];
    Object.keys(opened).forEach(function (p) {
      self.children[p].forEach(function (c) { if (!opened[c]) heap.push(c); });
    });
    while (heap.length) {
      var best = 0;
      for (var i = 1; i < heap.length; i++) {
        var a = heap[i], b = heap[best];
        if (this.count[a] > this.count[b] || (this.count[a] === this.count[b] && a < b)) best = i;
      }
      var path = heap.splice(best, 1)[0];
      if (this.closed[path] || drawn + cost(path) > this.budget) continue;
      opened[path] = true;
      drawn += cost(path);
      this.children[path].forEach(function (c) { heap.push(c); });
    }
    delete opened[""];
    this.opened = opened;
  };

  // each node is drawn as itself, or as the box of its outermost collapsed module
  Graph.prototype.rep = function (n) {
    var chain = splitPath(n.module || "");
    for (var i = 0; i < chain.length; i++) if (!this.opened[chain[i]]) return "module:" + chain[i];
    return "n:" + n.name;
  };

  Graph.prototype.dot = function () {
    var self = this, lines = [], drawn = 0, clusters = 0, colors = this.data.colors;
    var rep = {};
    this.nodes.forEach(function (n) { rep[n.name] = self.rep(n); });
    function write(path, indent) {
      self.direct[path].forEach(function (n) {
        var label = n.label;
        lines.push(indent + q("n:" + n.name) + " [label=" + q(label) + ', fillcolor="' +
                   (n.fill || colors[n.role] || "#ffffff") + '", tooltip=' + q(n.tooltip) + "];");
        drawn++;
      });
      self.children[path].forEach(function (c) {
        if (self.opened[c]) {
          clusters++;
          lines.push(indent + "subgraph " + q("cluster_" + clusters + "_" + c.replace(/\W+/g, "_")) + " {");
          lines.push(indent + '  label=' + q(c) + '; style="rounded,dashed"; color="#9ca3af"; fontcolor="#374151";');
          write(c, indent + "  ");
          lines.push(indent + "}");
        } else {
          lines.push(indent + q("module:" + c) + " [label=" + q(c + " — " + self.count[c] + " ops") +
                     ', shape=box3d, style=filled, fillcolor="#e5e7eb", tooltip=' +
                     q("module " + c + ": " + self.count[c] + " nodes, collapsed (click to open)") + "];");
          drawn++;
        }
      });
    }
    write("", "  ");
    var edges = {}, order = [];
    this.nodes.forEach(function (n) {
      var dst = rep[n.name];
      (n.args || []).forEach(function (a) {
        var src = rep[a];
        if (src === undefined || src === dst) return;
        var key = src + "\u0000" + dst;
        if (!(key in edges)) { edges[key] = 0; order.push([src, dst, key]); }
        edges[key]++;
      });
    });
    var head = ["digraph G {",
      '  graph [rankdir=TB, bgcolor="white", fontname="Helvetica", fontsize=11, newrank=true];',
      '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10, color="#6b7280", fontcolor="#111827"];',
      '  edge [color="#6b7280", arrowsize=0.6];'];
    if (drawn > 150) head.splice(2, 0, "  graph [nslimit=2, nslimit1=2, mclimit=0.5];");
    var tail = order.map(function (e) {
      var k = edges[e[2]];
      return "  " + q(e[0]) + " -> " + q(e[1]) +
             (k > 1 ? " [penwidth=" + Math.min(1 + Math.log2(k), 5).toFixed(1) + ', tooltip="' + k + ' edges"]' : "") + ";";
    });
    this.drawn = drawn;
    return head.concat(lines, tail, ["}"]).join("\n") + "\n";
  };

  // ---- one explorer (the DOM of a graph block)
  function Explorer(root) {
    this.root = root;
    var data = JSON.parse(root.querySelector("script.pcnb-gx-data").textContent);
    this.g = new Graph(root, data);
    this.host = root.querySelector(".pcnb-gx-picture");
    this.side = root.querySelector(".pcnb-gx-side");
    this.status = root.querySelector(".pcnb-gx-status");
    this.input = root.querySelector("input.pcnb-gx-q");
    this.matches = null;
    this.marked = null;  // {kind: "kernel"|"node", names: [...]}
    this.bind();
    var svg = this.host.querySelector("svg"), self = this;
    if (svg) { this.index(svg); this.say("static picture (laid out by dot)"); }
    else this.whenVisible(function () { self.render("initial"); });
    this.showKernels();
  }

  // a graph in a hidden tab is laid out when it is first shown, not while the page loads
  Explorer.prototype.whenVisible = function (fn) {
    var host = this.host;
    if (!window.IntersectionObserver) { fn(); return; }
    this.root.setAttribute("data-pcnb-state", "waiting");
    var seen = new IntersectionObserver(function (entries) {
      if (entries.some(function (e) { return e.isIntersecting; })) { seen.disconnect(); fn(); }
    });
    seen.observe(host);
  };

  Explorer.prototype.say = function (text) { if (this.status) this.status.textContent = text; };

  Explorer.prototype.render = function (why) {
    var self = this, t0 = performance.now(), dot = this.g.dot();
    this.say("laying out " + this.g.drawn + " nodes…");
    this.root.setAttribute("data-pcnb-state", "rendering");
    return viz().then(function (v) {
      var svg = v.renderSVGElement(dot);
      self.host.innerHTML = "";
      self.host.appendChild(svg);
      self.index(svg);
      self.applyMarks();
      var ms = Math.round(performance.now() - t0);
      self.root.setAttribute("data-pcnb-layout-ms", String(ms));
      // how many layouts this explorer made: tests check the work done, not the time
      self.layouts = (self.layouts || 0) + 1;
      self.root.setAttribute("data-pcnb-layouts", String(self.layouts));
      self.root.setAttribute("data-pcnb-state", "ready");
      self.say(self.g.drawn + " items drawn, laid out in your browser in " + ms + " ms (" + why + ")");
    }).catch(function (e) {
      self.root.setAttribute("data-pcnb-state", "failed");
      self.host.textContent = "The graph could not be laid out in this browser (" + e +
        "): the DOT text is below.";
    });
  };

  // map SVG groups to graph items by their <title> (the DOT node id, in both dot and Viz)
  Explorer.prototype.index = function (svg) {
    var self = this;
    this.svgNodes = {};
    this.svgModules = {};
    svg.querySelectorAll("g.node").forEach(function (g) {
      var t = g.querySelector("title");
      if (!t) return;
      var id = t.textContent;
      if (id.indexOf("n:") === 0) { self.svgNodes[id.slice(2)] = g; g.setAttribute("data-pcnb-node", id.slice(2)); }
      else if (id.indexOf("module:") === 0) { self.svgModules[id.slice(7)] = g; g.setAttribute("data-pcnb-module", id.slice(7)); }
      g.style.cursor = "pointer";
    });
    svg.querySelectorAll("g.cluster").forEach(function (g) {
      var label = g.querySelector("text");
      if (label) { g.setAttribute("data-pcnb-cluster", label.textContent); g.style.cursor = "zoom-out"; }
    });
    this.root.setAttribute("data-pcnb-drawn", String(Object.keys(this.svgNodes).length +
                                                     Object.keys(this.svgModules).length));
  };

  Explorer.prototype.bind = function () {
    var self = this, timer = null;
    this.host.addEventListener("click", function (ev) {
      var g = ev.target.closest("g.node, g.cluster");
      if (!g) return;
      if (g.hasAttribute("data-pcnb-node")) self.showNode(g.getAttribute("data-pcnb-node"));
      else if (g.hasAttribute("data-pcnb-module")) self.open([g.getAttribute("data-pcnb-module")]);
      else if (g.hasAttribute("data-pcnb-cluster")) self.close(g.getAttribute("data-pcnb-cluster"));
    });
    if (this.input) {
      this.input.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(function () { self.search(self.input.value); }, 80);
      });
      this.input.addEventListener("keydown", function (ev) {
        if (ev.key === "Enter") { clearTimeout(timer); self.search(self.input.value); }
      });
    }
    this.root.addEventListener("click", function (ev) {
      var a = ev.target.closest("[data-pcnb-act]");
      if (!a || !self.root.contains(a)) return;
      var act = a.getAttribute("data-pcnb-act"), arg = a.getAttribute("data-pcnb-arg");
      if (act === "node") { ev.preventDefault(); self.reveal(arg); }
      else if (act === "kernel") { ev.preventDefault(); self.showKernel(+arg); }
      else if (act === "kernels") { ev.preventDefault(); self.showKernels(); }
      else if (act === "collapse-all") {
        ev.preventDefault();
        self.g.pinned = {};
        self.g.children[""].forEach(function (c) { self.g.closed[c] = true; });
        self.g.plan();
        self.render("all collapsed");
      } else if (act === "reset") {
        ev.preventDefault();
        self.g.pinned = {};
        self.g.closed = {};
        self.g.plan();
        self.render("as first drawn");
      }
    });
  };

  Explorer.prototype.open = function (paths) {
    var g = this.g, missing = paths.filter(function (p) {
      return splitPath(p).some(function (x) { return !g.opened[x]; });
    });
    if (!missing.length) return Promise.resolve();
    missing.forEach(function (p) {
      g.pinned[p] = true;
      splitPath(p).forEach(function (x) { delete g.closed[x]; });
    });
    g.plan();
    return this.render("opened " + missing.join(", "));
  };

  Explorer.prototype.close = function (path) {
    var g = this.g;
    Object.keys(g.pinned).forEach(function (p) {
      if (p === path || p.indexOf(path + ".") === 0) delete g.pinned[p];
    });
    g.closed[path] = true;
    g.plan();
    return this.render("closed " + path);
  };

  // ---- search: every term must occur in the node's name, op, module, shape, dtype or kernels
  Explorer.prototype.search = function (text) {
    var terms = text.toLowerCase().split(/\s+/).filter(Boolean);
    var t0 = performance.now();
    if (!terms.length) { this.matches = null; this.applyMarks(); this.showKernels(); return; }
    this.matches = this.g.nodes.filter(function (n) {
      return terms.every(function (t) { return n.hay.indexOf(t) >= 0; });
    });
    this.applyMarks();
    var ms = (performance.now() - t0).toFixed(1);
    this.root.setAttribute("data-pcnb-search-ms", ms);
    var rows = this.matches.slice(0, 200).map(function (n) {
      return '<li><a href="#" data-pcnb-act="node" data-pcnb-arg="' + esc(n.name) + '"><code>' +
        esc(n.name) + "</code></a> " + esc(n.target) + ' <span class="pcnb-muted">' +
        esc(n.shape) + (n.module ? " · " + esc(n.module) : "") + "</span></li>";
    });
    this.side.innerHTML = "<h4>" + this.matches.length + " node(s) match " +
      '<span class="pcnb-muted">(' + ms + " ms)</span></h4>" +
      (this.matches.length > 200 ? '<p class="pcnb-muted">first 200 shown</p>' : "") +
      '<ul class="pcnb-gx-results">' + rows.join("") + "</ul>" +
      '<p><a href="#" data-pcnb-act="kernels">all kernels</a></p>';
  };

  Explorer.prototype.applyMarks = function () {
    var self = this, svg = this.host.querySelector("svg");
    if (!svg) return;
    svg.querySelectorAll(".pcnb-gx-match, .pcnb-gx-match-in, .pcnb-gx-mark, .pcnb-gx-mark-in").forEach(function (g) {
      g.classList.remove("pcnb-gx-match", "pcnb-gx-match-in", "pcnb-gx-mark", "pcnb-gx-mark-in");
    });
    function paint(names, cls) {
      names.forEach(function (name) {
        var g = self.svgNodes[name];
        if (g) { g.classList.add(cls); return; }
        var n = self.g.byName[name];
        var box = n && self.svgModules[self.g.rep(n).slice(7)];
        if (box) box.classList.add(cls + "-in");
      });
    }
    svg.classList.toggle("pcnb-gx-searching", !!this.matches);
    if (this.matches) paint(this.matches.map(function (n) { return n.name; }), "pcnb-gx-match");
    if (this.marked) paint(this.marked.names, "pcnb-gx-mark");
    this.root.setAttribute("data-pcnb-marked", String(svg.querySelectorAll(".pcnb-gx-mark").length));
  };

  // ---- node -> kernels, kernel -> nodes
  Explorer.prototype.reveal = function (name) {
    var n = this.g.byName[name], self = this;
    if (!n) return Promise.resolve();
    return this.open(n.module ? [n.module] : []).then(function () {
      self.showNode(name);
      var g = self.svgNodes[name];
      if (g && g.scrollIntoView) g.scrollIntoView({block: "center", inline: "center"});
    });
  };

  Explorer.prototype.kernelLink = function (k) {
    var kern = this.g.kernels[k];
    var src = kern.anchor ? ' · <a class="pcnb-jump" href="#' + esc(kern.anchor) + '">source L' + kern.line + "</a>" : "";
    return '<a href="#" class="pcnb-gx-klink" data-pcnb-act="kernel" data-pcnb-arg="' + k + '"><code>' +
      esc(kern.name) + "</code></a> " + '<span class="pcnb-muted">' + esc(kern.kind) + "</span>" + src;
  };

  Explorer.prototype.showNode = function (name) {
    var n = this.g.byName[name], self = this;
    if (!n) return;
    this.marked = {kind: "node", names: [name]};
    this.applyMarks();
    var ks = n.kernels.map(function (k) { return "<li>" + self.kernelLink(k) + "</li>"; });
    this.side.innerHTML = '<h4>node <code class="pcnb-gx-selected">' + esc(n.name) + "</code></h4>" +
      "<p><code>" + esc(n.target) + "</code> " + esc(n.shape) + " " + esc(n.dtype) + "</p>" +
      '<p class="pcnb-muted">' + esc(n.role) + (n.module ? " · module " + esc(n.module) : "") + "</p>" +
      (n.stack ? '<pre class="pcnb-gx-stack">' + esc(n.stack) + "</pre>" : "") +
      "<h4>computed by</h4>" + (ks.length ? '<ul class="pcnb-gx-node-kernels">' + ks.join("") + "</ul>"
        : '<p class="pcnb-muted">no kernel (an input, a view, or the eager backend)</p>') +
      '<p><a href="#" data-pcnb-act="kernels">all kernels</a></p>';
    this.root.setAttribute("data-pcnb-selected", name);
  };

  Explorer.prototype.showKernel = function (k) {
    var kern = this.g.kernels[k], self = this;
    if (!kern) return Promise.resolve();
    var inside = kern.nodes.map(function (x) { return self.g.byName[x]; }).filter(Boolean);
    this.marked = {kind: "kernel", names: inside.map(function (n) { return n.name; })};
    var mods = inside.map(function (n) { return n.module; }).filter(Boolean);
    var rows = inside.map(function (n) {
      return '<li><a href="#" data-pcnb-act="node" data-pcnb-arg="' + esc(n.name) + '"><code>' +
        esc(n.name) + "</code></a> " + esc(n.target) + "</li>";
    });
    this.side.innerHTML = "<h4>kernel " + this.kernelLink(k) + "</h4>" +
      "<p>" + inside.length + " graph node(s), outlined in the picture:</p>" +
      '<ul class="pcnb-gx-kernel-nodes">' + rows.join("") + "</ul>" +
      (kern.src ? "<details><summary>its source (lines " + kern.line + "–)</summary>" +
        '<pre class="pcnb-gx-src">' + esc(kern.src) + "</pre></details>" : "") +
      '<p><a href="#" data-pcnb-act="kernels">all kernels</a></p>';
    this.root.setAttribute("data-pcnb-kernel", kern.name);
    return this.open(mods).then(function () { self.applyMarks(); });
  };

  Explorer.prototype.showKernels = function () {
    var self = this;
    if (!this.g.kernels.length) {
      this.side.innerHTML = '<p class="pcnb-muted">No generated kernels. Click a node for its details; search above.</p>';
      return;
    }
    this.side.innerHTML = "<h4>" + this.g.kernels.length + " kernel(s)</h4>" +
      '<p class="pcnb-muted">click one to outline its graph nodes; click a node for its kernels</p>' +
      '<ul class="pcnb-gx-kernels">' + this.g.kernels.map(function (kern, k) {
        return "<li>" + self.kernelLink(k) + ' <span class="pcnb-muted">' + kern.nodes.length + " node(s)</span></li>";
      }).join("") + "</ul>";
  };

  GX.explorers = [];
  GX.wire = function (root) {
    if (!root || root.getAttribute("data-pcnb-wired")) return null;
    root.setAttribute("data-pcnb-wired", "1");
    var ex = new Explorer(root);
    root.__pcnbExplorer = ex;
    GX.explorers.push(ex);
    return ex;
  };
  // from another tab (the report's Kernels table): outline kernel k in this graph
  GX.showKernel = function (root, k) {
    var ex = root && (root.__pcnbExplorer || GX.wire(root));
    return ex ? ex.showKernel(k) : Promise.resolve();
  };
  GX.splitPath = splitPath;
})();
