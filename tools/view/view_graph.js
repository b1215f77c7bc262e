// The DAG view: images as lanes (or one node each while collapsed), CARs
// coloured by kind, dependency and message edges, the critical path.
cfView.graph = (function (view) {
  'use strict';
  var KINDS = ['SEND', 'RECV', 'RECV_REDUCE', 'REDUCE', 'COPY', 'JOIN'];
  var COLOURS = { SEND: '#1e88e5', RECV: '#43a047', RECV_REDUCE: '#00897b',
                  REDUCE: '#fb8c00', COPY: '#8e24aa', JOIN: '#9e9e9e' };
  // Shapes too, so kinds stay apart without colour.
  var SHAPES = { SEND: 'tag', RECV: 'round-rectangle', RECV_REDUCE: 'round-hexagon',
                 REDUCE: 'diamond', COPY: 'rectangle', JOIN: 'ellipse' };
  // Above this many nodes dagre takes seconds; lanes are computed directly.
  var DAGRE_MAX_NODES = 1500;
  // Lane geometry: a CAR's row is its depth, so a message always points down.
  var DX = 80, DY = 60, BOX = 90, GAP = 40;

  var dag, model, cy, state;

  // Global CAR numbers, message pairs, depth (longest chain of CARs ending
  // at each, message edges included) and the critical path.
  function buildModel() {
    var P = dag.images.length, offset = [0];
    dag.images.forEach(function (img) { offset.push(offset[offset.length - 1] + img.cars.length); });
    var N = offset[P];
    var imageOf = new Int32Array(N), cars = new Array(N);
    var succ = new Array(N), indeg = new Int32Array(N);
    var partner = new Int32Array(N).fill(-1);
    var deps = 0;
    dag.images.forEach(function (img, i) {
      img.cars.forEach(function (car, j) {
        var g = offset[i] + j;
        imageOf[g] = i;
        cars[g] = car;
        succ[g] = [];
      });
    });
    dag.images.forEach(function (img, i) {
      img.cars.forEach(function (car, j) {
        (car.deps || []).forEach(function (d) { succ[offset[i] + d.car].push(offset[i] + j); deps++; });
        indeg[offset[i] + j] += (car.deps || []).length;
      });
    });
    var messagesOf = [];
    for (var i = 0; i < P; i++) messagesOf.push([]);
    (dag.messages || []).forEach(function (m, k) {
      messagesOf[m.from[0]].push(k);
      messagesOf[m.to[0]].push(k);
      var s = offset[m.from[0]] + m.from[1], r = offset[m.to[0]] + m.to[1];
      partner[s] = r;
      partner[r] = s;
      succ[s].push(r);
      indeg[r]++;
    });
    var depth = new Int32Array(N), best = new Int32Array(N).fill(-1), queue = [];
    for (var g = 0; g < N; g++) if (indeg[g] === 0) { queue.push(g); depth[g] = 1; }
    for (var q = 0; q < queue.length; q++) {
      var u = queue[q];
      succ[u].forEach(function (v) {
        if (depth[u] + 1 > depth[v]) { depth[v] = depth[u] + 1; best[v] = u; }
        if (--indeg[v] === 0) queue.push(v);
      });
    }
    if (queue.length !== N) window.cfErrors.push('the DAG has a cycle');
    var last = 0;
    for (g = 1; g < N; g++) if (depth[g] > depth[last]) last = g;
    var onPath = new Uint8Array(N);
    for (g = N ? last : -1; g >= 0; g = best[g]) onPath[g] = 1;
    // Within an image, CARs of equal depth sit side by side.
    var slot = new Int32Array(N), width = new Int32Array(P).fill(1), maxDepth = new Int32Array(P);
    dag.images.forEach(function (img, i) {
      var used = new Map();
      for (var g = offset[i]; g < offset[i + 1]; g++) {
        var k = used.get(depth[g]) || 0;
        used.set(depth[g], k + 1);
        slot[g] = k;
        width[i] = Math.max(width[i], k + 1);
        maxDepth[i] = Math.max(maxDepth[i], depth[g]);
      }
    });
    return { P: P, N: N, offset: offset, imageOf: imageOf, cars: cars, partner: partner, deps: deps,
             messagesOf: messagesOf,
             depth: depth, best: best, onPath: onPath, pathLength: N ? depth[last] : 0,
             slot: slot, width: width, maxDepth: maxDepth };
  }

  function carBytes(car) {
    if (car.kind === 'SEND') return car.src ? car.src.length : 0;
    return car.dst ? car.dst.length : 0;
  }

  function carLabel(car) {
    if (car.kind === 'SEND') return 'SEND \u2192' + car.peer + ' t' + car.tag + '\n' + view.bytes(carBytes(car));
    if (car.kind === 'RECV' || car.kind === 'RECV_REDUCE') {
      return car.kind + ' \u2190' + car.peer + ' t' + car.tag + '\n' + view.bytes(carBytes(car));
    }
    if (car.kind === 'JOIN') return 'JOIN';
    return car.kind + '\n' + view.bytes(carBytes(car));
  }

  // Text the search box matches against.
  function carText(g) {
    var car = model.cars[g];
    return (car.kind + ' peer ' + (car.peer === undefined ? '' : car.peer) + ' tag ' +
            (car.tag === undefined ? '' : car.tag) + ' ' + carBytes(car) + 'B' +
            (car.sync ? ' sync' : '')).toLowerCase();
  }

  // The node a CAR is drawn as now, or null when filtered out.
  function nodeOf(g) {
    var i = model.imageOf[g];
    if (!state.visible(i)) return null;
    if (!state.expanded[i]) return 'i' + i;
    return state.kinds.has(model.cars[g].kind) ? 'c' + g : null;
  }

  // Where things sit. Collapsed images fill a near-square grid, each in the
  // cell of its place among the shown images; expanded images are lanes
  // right of it, in image order. Toggling an image then moves nothing but
  // the lanes after it, so a click on a 4096-image page stays cheap.
  function placeGrid(images) {
    state.cols = Math.max(1, Math.ceil(Math.sqrt(images.length)));
    state.cell = {};
    images.forEach(function (i, k) { state.cell[i] = k; });
    var anyCollapsed = images.some(function (i) { return !state.expanded[i]; });
    state.gridRight = anyCollapsed ? -3 * GAP : 0;
  }

  function cellCentre(i) {
    var k = state.cell[i], cols = state.cols;
    return { x: state.gridRight - (cols - k % cols) * (BOX + GAP) + BOX / 2,
             y: Math.floor(k / cols) * (BOX + GAP) + BOX / 2 };
  }

  // The left edge of each expanded image's lane.
  function placeLanes() {
    var x = 0, lanes = {};
    for (var i = 0; i < model.P; i++) {
      if (!state.visible(i) || !state.expanded[i]) continue;
      lanes[i] = x;
      x += model.width[i] * DX + GAP;
    }
    return lanes;
  }

  function imageNodes(i, out) {
    var img = dag.images[i];
    if (!state.expanded[i]) {
      var critical = false;
      for (var g = model.offset[i]; g < model.offset[i + 1]; g++) critical = critical || model.onPath[g] === 1;
      out.push({ group: 'nodes', classes: 'collapsed' + critClass(critical), position: cellCentre(i),
                 data: { id: 'i' + i, image: i, crit: critical ? 1 : 0,
                         label: 'image ' + i + '\n' + img.cars.length + ' CARs' } });
      return;
    }
    var x = state.lanes[i];
    out.push({ group: 'nodes', classes: 'image', data: { id: 'i' + i, image: i, label: 'image ' + i } });
    for (g = model.offset[i]; g < model.offset[i + 1]; g++) {
      var car = model.cars[g];
      if (!state.kinds.has(car.kind)) continue;
      out.push({ group: 'nodes', classes: 'car ' + car.kind + (car.sync ? ' sync' : '') + critClass(model.onPath[g]) +
                                          runStateClass(i, g - model.offset[i]),
                 position: { x: x + model.slot[g] * DX + DX / 2, y: model.depth[g] * DY },
                 data: { id: 'c' + g, parent: 'i' + i, g: g, kind: car.kind, label: carLabel(car),
                         crit: model.onPath[g] } });
    }
  }

  // A hang report's states (graph JSON "run_state": one image's CARs):
  // the class that rings the CAR in its state's colour.
  function runState(i, c) {
    var rs = dag.run_state;
    return rs && rs.image === i && typeof rs.cars[c] === 'string' ? rs.cars[c] : undefined;
  }
  function runStateClass(i, c) {
    var s = runState(i, c);
    return s ? ' state-' + s : '';
  }

  // Critical elements are marked as they are made: a pass over thousands of
  // elements afterwards costs more than the marking.
  function critClass(crit) {
    return crit && view.$('critical').checked ? ' critical' : '';
  }

  function depEdges(i, out) {
    if (!state.visible(i) || !state.expanded[i]) return;
    for (var g = model.offset[i]; g < model.offset[i + 1]; g++) {
      var target = nodeOf(g);
      (model.cars[g].deps || []).forEach(function (d) {
        var u = model.offset[i] + d.car, source = nodeOf(u);
        if (!source || !target) return;
        var crit = model.onPath[g] && model.best[g] === u ? 1 : 0;
        out.push({ group: 'edges', classes: 'dep ' + d.kind + critClass(crit),
                   data: { id: 'd' + u + '_' + g, source: source, target: target, kind: d.kind, crit: crit } });
      });
    }
  }

  // Messages (indices into dag.messages): one edge each between CARs; one
  // per pair of nodes, with counts and bytes, where either end is collapsed.
  function messageEdges(list, out) {
    var pairs = new Map();
    list.forEach(function (k) {
      var m = dag.messages[k];
      var s = model.offset[m.from[0]] + m.from[1], r = model.offset[m.to[0]] + m.to[1];
      var source = nodeOf(s), target = nodeOf(r);
      if (!source || !target) return;
      var crit = model.onPath[r] && model.best[r] === s ? 1 : 0;
      var bytes = carBytes(model.cars[s]);
      if (source[0] === 'c' && target[0] === 'c') {
        out.push({ group: 'edges', classes: 'msg' + critClass(crit),
                   data: { id: 'm' + s, source: source, target: target, send: s, bytes: bytes, crit: crit } });
        return;
      }
      var key = source + '>' + target, pair = pairs.get(key);
      if (!pair) {
        pair = { group: 'edges', classes: 'agg',
                 data: { id: 'a' + key, source: source, target: target, count: 0, bytes: 0, crit: 0 } };
        pairs.set(key, pair);
        out.push(pair);
      }
      pair.data.count++;
      pair.data.bytes += bytes;
      pair.data.crit = pair.data.crit || crit;
    });
    pairs.forEach(function (pair) {
      pair.data.label = pair.data.count + (pair.data.count === 1 ? ' msg, ' : ' msgs, ') + view.bytes(pair.data.bytes);
      pair.data.weight = Math.min(6, 1 + Math.log2(pair.data.count));
      pair.classes += critClass(pair.data.crit);
    });
  }
  function stylesheet(big) {
    var s = [
      { selector: big ? 'node.labelled' : 'node', style: { 'label': 'data(label)' } },
      { selector: 'node', style: { 'font-size': 9, 'text-wrap': 'wrap', 'text-valign': 'center',
                                   'min-zoomed-font-size': 7 } },
      { selector: 'node.image', style: { 'background-color': '#eceff1', 'border-color': '#90a4ae',
                                         'border-width': 1, 'text-valign': 'top', 'font-size': 14,
                                         'min-zoomed-font-size': 4, 'padding': 12,
                                         'shape': 'round-rectangle' } },
      { selector: 'node.collapsed', style: { 'shape': 'round-rectangle', 'width': BOX - 20, 'height': BOX - 30,
                                             'background-color': '#cfd8dc', 'border-color': '#546e7a',
                                             'border-width': 1, 'font-size': 10 } },
      { selector: 'node.car', style: { 'width': DX - 14, 'height': 30, 'color': '#fff',
                                       'text-outline-width': 0, 'font-size': 8 } },
      { selector: 'node.sync', style: { 'border-width': 3, 'border-style': 'double', 'border-color': '#000' } },
      { selector: 'edge', style: { 'width': 1, 'line-color': '#90a4ae', 'target-arrow-color': '#90a4ae',
                                   'target-arrow-shape': 'triangle', 'arrow-scale': 0.7,
                                   'curve-style': big ? 'straight' : 'bezier' } },
      { selector: 'edge.buffer', style: { 'line-style': 'dashed', 'line-color': '#546e7a',
                                          'target-arrow-color': '#546e7a' } },
      { selector: 'edge.msg', style: { 'width': 2.5, 'line-color': '#3949ab', 'target-arrow-color': '#3949ab' } },
      { selector: 'edge.agg', style: { 'width': 'data(weight)', 'line-color': '#3949ab',
                                       'target-arrow-color': '#3949ab', 'font-size': 8,
                                       'min-zoomed-font-size': 8, 'text-rotation': 'autorotate' } },
      { selector: big ? 'edge.agg.labelled' : 'edge.agg', style: { 'label': 'data(label)' } },
      { selector: '.critical', style: { 'line-color': '#e53935', 'target-arrow-color': '#e53935',
                                        'border-color': '#e53935', 'border-width': 3 } },
      { selector: 'node.state-done', style: { 'border-width': 4, 'border-color': '#2e7d32' } },
      { selector: 'node.state-running', style: { 'border-width': 4, 'border-color': '#f9a825' } },
      { selector: 'node.state-ready', style: { 'border-width': 4, 'border-color': '#0288d1' } },
      { selector: 'node.state-waiting_dep', style: { 'border-width': 4, 'border-color': '#9e9e9e', 'border-style': 'dotted' } },
      { selector: 'node.state-waiting_message', style: { 'border-width': 6, 'border-color': '#c51162' } },
      { selector: 'edge.critical', style: { 'width': 3.5, 'z-index': 10 } },
      { selector: '.match', style: { 'overlay-color': '#ffeb3b', 'overlay-opacity': 0.6, 'overlay-padding': 4 } },
      { selector: ':selected', style: { 'overlay-color': '#000', 'overlay-opacity': 0.2 } },
    ];
    KINDS.forEach(function (k) {
      s.push({ selector: 'node.car.' + k,
               style: { 'background-color': COLOURS[k], 'shape': SHAPES[k] } });
    });
    return s;
  }

  // Big pages label only what is in view once zoomed in: cytoscape
  // measures every label it has, even one too small to be drawn, and on
  // thousands of nodes that measuring is most of the time to open.
  function labelInView() {
    if (!state.big || cy.zoom() < 0.3) return;
    var ext = cy.extent();
    var nodes = cy.nodes().filter(function (n) {
      var p = n.position();
      return !n.hasClass('labelled') && p.x >= ext.x1 && p.x <= ext.x2 && p.y >= ext.y1 && p.y <= ext.y2;
    });
    cy.batch(function () { nodes.union(nodes.connectedEdges()).addClass('labelled'); });
  }

  function visibleImages() {
    var images = [];
    for (var i = 0; i < model.P; i++) if (state.visible(i)) images.push(i);
    return images;
  }

  function reportCounts() {
    var images = visibleImages(), expanded = images.filter(function (i) { return state.expanded[i]; }).length;
    var layout = view.$('layout');
    layout.options[1].disabled = cy.nodes().length > DAGRE_MAX_NODES;
    view.setStatus({ nodes: cy.nodes().length, edges: cy.edges().length, expanded: expanded,
                     collapsed: images.length - expanded });
  }

  // Rebuilds every element from the state (filters, expanded images).
  function rebuild() {
    var images = visibleImages(), els = [];
    placeGrid(images);
    state.lanes = placeLanes();
    images.forEach(function (i) { imageNodes(i, els); depEdges(i, els); });
    messageEdges((dag.messages || []).map(function (m, k) { return k; }), els);
    cy.batch(function () {
      cy.elements().remove();
      cy.add(els);
    });
    if (view.$('search').value.trim() !== '') applySearch();
    reportCounts();
    var layout = view.$('layout');
    if (layout.value === 'dagre' && !layout.options[1].disabled) runLayout();
    else layout.value = 'lanes';
  }

  // Swaps one image between its collapsed node and its lane: only its own
  // elements and its messages are made again; the lanes after it shift.
  function toggleImage(i) {
    state.expanded[i] = !state.expanded[i];
    if (!state.visible(i)) return;
    if (state.cell[i] === undefined || (state.gridRight === 0 && !state.expanded[i])) {
      rebuild();  // the grid was laid out without room for collapsed images
    } else {
      var before = state.lanes, els = [];
      state.lanes = placeLanes();
      imageNodes(i, els);
      depEdges(i, els);
      messageEdges(model.messagesOf[i], els);
      cy.batch(function () {
        var old = cy.getElementById('i' + i);
        old.union(old.descendants()).remove();
        cy.add(els);
        for (var j in state.lanes) {
          if (Number(j) !== i && before[j] !== state.lanes[j]) {
            cy.getElementById('i' + j).children().shift({ x: state.lanes[j] - before[j], y: 0 });
          }
        }
      });
      if (view.$('search').value.trim() !== '') applySearch();
      reportCounts();
    }
    var node = cy.getElementById('i' + i);
    if (view.$('layout').value === 'dagre') runLayout();
    else if (state.expanded[i]) cy.fit(node.union(node.children().neighborhood()), 40);
    showImage(i);
  }

  function runLayout() {
    if (view.$('layout').value === 'dagre') {
      cy.layout({ name: 'dagre', rankDir: 'TB', nodeSep: 12, rankSep: 36, animate: false }).run();
      cy.fit(undefined, 30);
    } else {
      rebuild();
      fitAll();
    }
  }

  // cy.fit measures every label (seconds for thousands of nodes); the
  // nodes' centres are enough to frame the page.
  function fitAll() {
    if (view.$('layout').value === 'dagre') { cy.fit(undefined, 30); return; }
    var x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
    cy.nodes().forEach(function (n) {
      if (n.isParent()) return;
      var p = n.position();
      x0 = Math.min(x0, p.x); y0 = Math.min(y0, p.y); x1 = Math.max(x1, p.x); y1 = Math.max(y1, p.y);
    });
    if (x0 === Infinity) return;
    x0 -= BOX; y0 -= BOX; x1 += BOX; y1 += BOX;
    var zoom = Math.max(cy.minZoom(), Math.min(cy.width() / (x1 - x0), cy.height() / (y1 - y0), 2));
    cy.viewport({ zoom: zoom, pan: { x: (cy.width() - zoom * (x0 + x1)) / 2, y: (cy.height() - zoom * (y0 + y1)) / 2 } });
  }

  function applyCritical() {
    var on = view.$('critical').checked;
    cy.batch(function () {
      cy.elements('[crit = 1]').toggleClass('critical', on);
    });
  }

  // Marks the CARs (or their collapsed images) the search names:
  // "3:5" image 3 car 5, "image 3", or text of the label ("send", "tag 2").
  function applySearch() {
    var q = view.$('search').value.trim().toLowerCase(), hits = new Set(), m;
    cy.batch(function () { cy.elements('.match').removeClass('match'); });
    if (q !== '') {
      if ((m = /^(\d+):(\d+)$/.exec(q)) && Number(m[1]) < model.P &&
          Number(m[2]) < dag.images[Number(m[1])].cars.length) {
        hits.add(nodeOf(model.offset[Number(m[1])] + Number(m[2])));
      } else if ((m = /^(?:image|i)\s*(\d+)$/.exec(q)) && Number(m[1]) < model.P) {
        if (state.visible(Number(m[1]))) hits.add('i' + m[1]);
      } else {
        for (var g = 0; g < model.N; g++) if (carText(g).indexOf(q) >= 0) hits.add(nodeOf(g));
      }
      hits.delete(null);
    }
    var matched = cy.collection(Array.from(hits, function (id) { return cy.getElementById(id); }));
    cy.batch(function () { matched.addClass('match'); });
    if (q !== '' && matched.length && matched.length <= 200) cy.fit(matched, 60);
    view.setStatus({ matches: matched.length });
  }

  function bufferText(b) {
    if (!b) return undefined;
    return b.space + (b.space === 'temp' ? ' slot ' + b.slot : '') + ' +' + b.offset + ', ' + b.length + ' B';
  }

  function showCar(g) {
    var car = model.cars[g], i = model.imageOf[g], p = model.partner[g];
    var deps = (car.deps || []).map(function (d) { return d.car + ' (' + d.kind + ')'; }).join(', ');
    var message;
    if (p >= 0) {
      message = (car.kind === 'SEND' ? 'to image ' : 'from image ') + model.imageOf[p] + ', car ' +
                (p - model.offset[model.imageOf[p]]);
    }
    view.showDetails('image ' + i + ', car ' + (g - model.offset[i]), [
      ['kind', car.kind], ['peer', car.peer], ['tag', car.tag],
      ['bytes', car.kind === 'JOIN' ? undefined : carBytes(car)], ['message', message],
      ['src', bufferText(car.src)], ['src2', bufferText(car.src2)], ['dst', bufferText(car.dst)],
      ['incoming_left', car.incoming_left === undefined ? undefined : String(car.incoming_left)],
      ['shape', car.shape], ['first_elems', car.first_elems], ['chunk_elems', car.chunk_elems],
      ['sync', car.sync ? 'yes (added by a sync mode)' : undefined], ['member', car.member],
      ['state', runState(i, g - model.offset[i])],
      ['deps', deps || 'none'],
      ['depth', model.depth[g] + ' of ' + model.pathLength + (model.onPath[g] ? ' (on the critical path)' : '')],
    ]);
  }

  function showImage(i) {
    var img = dag.images[i], byKind = {}, sent = 0, sentBytes = 0, received = 0;
    img.cars.forEach(function (car) {
      byKind[car.kind] = (byKind[car.kind] || 0) + 1;
      if (car.kind === 'SEND') { sent++; sentBytes += carBytes(car); }
      if (car.kind === 'RECV' || car.kind === 'RECV_REDUCE') received++;
    });
    var kinds = KINDS.filter(function (k) { return byKind[k]; }).map(function (k) { return k + ' ' + byKind[k]; });
    view.showDetails('image ' + i, [
      ['CARs', img.cars.length], ['by kind', kinds.join(', ')],
      ['sends', sent + ' (' + view.bytes(sentBytes) + ')'], ['receives', received],
      ['src_bytes', img.src_bytes], ['dst_bytes', img.dst_bytes],
      ['temps', img.temps.length ? img.temps.join(', ') + ' B' : 'none'], ['exit', img.exit],
      ['members', img.members ? img.members.length : undefined],
    ], [[state.expanded[i] ? 'collapse' : 'expand', function () { toggleImage(i); }]]);
  }

  function showEdge(e) {
    var d = e.data();
    var end = function (id) {
      if (id[0] === 'i') return 'image ' + id.slice(1);
      var g = Number(id.slice(1)), i = model.imageOf[g];
      return 'image ' + i + ', car ' + (g - model.offset[i]);
    };
    if (e.hasClass('dep')) {
      view.showDetails(d.kind + ' dependency', [['from', end(d.source)], ['to', end(d.target)],
                       ['meaning', d.kind === 'buffer' ? 'the later CAR touches bytes the earlier one uses'
                                                       : 'ordering only']]);
    } else if (e.hasClass('msg')) {
      view.showDetails('message', [['from', end(d.source)], ['to', end(d.target)],
                                   ['tag', model.cars[d.send].tag], ['bytes', d.bytes]]);
    } else {
      view.showDetails('messages', [['from', end(d.source)], ['to', end(d.target)],
                                    ['messages', d.count], ['bytes', d.bytes]]);
    }
  }

  function setAll(expanded) {
    for (var i = 0; i < model.P; i++) state.expanded[i] = expanded;
    rebuild();
    fitAll();
  }

  function show(target) {
    if (target === cy) return;
    if (target.isEdge()) showEdge(target);
    else if (target.hasClass('car')) showCar(target.data('g'));
    else showImage(target.data('image'));
  }

  function bindEvents() {
    cy.on('tap', 'node.collapsed', function (e) { toggleImage(e.target.data('image')); });
    cy.on('tap', function (e) { state.pinned = e.target !== cy; show(e.target); });
    cy.on('mouseover', 'node, edge', function (e) { if (!state.pinned) show(e.target); });
    var timer;
    view.$('search').addEventListener('input', function () {
      clearTimeout(timer);
      timer = setTimeout(applySearch, 200);
    });
    view.$('images').addEventListener('change', function (e) {
      var set = view.parseRanges(e.target.value, model.P);
      state.visible = set ? function (i) { return set.has(i); } : function () { return true; };
      rebuild();
      fitAll();
    });
    view.$('critical').addEventListener('change', applyCritical);
    view.$('layout').addEventListener('change', runLayout);
    view.$('expand-all').addEventListener('click', function () { setAll(true); });
    view.$('collapse-all').addEventListener('click', function () { setAll(false); });
    view.$('fit').addEventListener('click', function () { fitAll(); });
  }

  function buildControls() {
    var kinds = view.$('kinds');
    KINDS.forEach(function (k) {
      var box = view.el('input', { type: 'checkbox', checked: '' });
      box.addEventListener('change', function () {
        if (box.checked) state.kinds.add(k); else state.kinds.delete(k);
        rebuild();
      });
      kinds.appendChild(view.el('label', {}, box,
                                view.el('span', { 'class': 'swatch', style: 'background:' + COLOURS[k] }), k));
    });
    var layout = view.$('layout');
    layout.appendChild(view.el('option', { value: 'lanes' }, 'lanes by depth'));
    layout.appendChild(view.el('option', { value: 'dagre' }, 'dagre (small graphs)'));
    view.$('legend').appendChild(view.el('span', {}, 'thin solid: progress dependency'));
    view.$('legend').appendChild(view.el('span', {}, 'dashed: buffer dependency'));
    view.$('legend').appendChild(view.el('span', {}, 'bold blue: message (SEND \u2192 its RECV)'));
    view.$('legend').appendChild(view.el('span', {}, 'red: critical path'));
    view.$('legend').appendChild(view.el('span', {}, 'double black border: sync CAR'));
    view.$('legend').appendChild(view.el('span', {}, 'grey box: collapsed image (click to expand)'));
    if (dag.run_state) {
      view.$('legend').appendChild(view.el('span', {}, 'hang report, image ' + dag.run_state.image +
          ': ring green done, amber running, blue ready, dotted grey waiting on a dependency, thick magenta waiting for a message'));
    }
  }

  // F.html#car=3:5 opens with image 3 expanded and its CAR 5 selected
  // (links, screenshots).
  function selectFromAddress() {
    var m = /^#car=(\d+):(\d+)$/.exec(window.location.hash), i = Number(m && m[1]);
    if (!m || i >= model.P || Number(m[2]) >= dag.images[i].cars.length) return;
    if (!state.expanded[i]) toggleImage(i);
    var g = model.offset[i] + Number(m[2]), node = cy.getElementById(nodeOf(g) || '');
    if (!node.length) return;
    node.select();
    state.pinned = true;
    showCar(g);
  }

  function start(data, t0) {
    dag = data.dag;
    if (!cytoscape('layout', 'dagre') && window.cytoscapeDagre) cytoscape.use(window.cytoscapeDagre);
    model = buildModel();
    var c = dag.collective, bytes = 0;
    model.cars.forEach(function (car) { if (car.kind === 'SEND') bytes += carBytes(car); });
    view.$('title').textContent = c.kind + ' \u00b7 ' + c.algorithm;
    view.$('summary').textContent = model.P + ' images, ' + view.bytes(c.nbytes) + ', ' + model.N + ' CARs, ' +
        (dag.messages || []).length + ' messages (' + view.bytes(bytes) + '), critical path ' +
        model.pathLength + ' CARs \u00b7 ' + data.file;
    var collapse = model.P > data.collapse_above;
    state = { expanded: new Array(model.P).fill(!collapse), kinds: new Set(KINDS),
              visible: function () { return true; }, pinned: false, lanes: {}, cell: {}, cols: 1, gridRight: 0 };
    var big = model.P > data.collapse_above || model.N > 5000;
    state.big = big;
    cy = cytoscape({ container: view.$('graph'), style: stylesheet(big), layout: { name: 'preset' },
                     boxSelectionEnabled: false, textureOnViewport: big, hideEdgesOnViewport: big,
                     motionBlur: false, pixelRatio: big ? 1 : 'auto', minZoom: 0.01, maxZoom: 4 });
    buildControls();
    view.setStatus({ mode: 'graph', images: model.P, cars: model.N, deps: model.deps,
                     messages: (dag.messages || []).length, critical: model.pathLength });
    rebuild();
    fitAll();
    bindEvents();
    var timer;
    cy.on('viewport', function () { clearTimeout(timer); timer = setTimeout(labelInView, 150); });
    view.setStatus({ build_ms: Math.round(performance.now() - t0) });
    selectFromAddress();
    cy.one('render', function () {
      view.setStatus({ rendered: 1, render_ms: Math.round(performance.now() - t0) });
    });
  }

  return { start: start };
})(cfView);
