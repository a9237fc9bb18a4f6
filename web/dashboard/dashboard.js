// gpuherd's dashboard: plain JavaScript over the daemon's /v1 API, charts by
// uPlot. Reads need no token; actions send the API token as a Bearer header.
// The token comes from a URL the CLI prints (#token=...) or is pasted once,
// and stays in this browser's localStorage for this address only.
'use strict';

(() => {
  const POLL_MS = 3000;          // the issue allows at most 5 s
  // Time ranges of the fleet's charts and heatmap: the last hour from the
  // readings (polled incrementally), longer ones from the stored per-minute
  // rollups (fetched whole, at most once a minute).
  const RANGES = [['1 h', 3600], ['6 h', 21600], ['24 h', 86400], ['7 d', 604800]];
  const READINGS_S = 3600;
  const ROLLUP_REFRESH_MS = 60000;
  const DENSE_ABOVE = 16;        // more GPUs than this: the dense table by default
  const BURNIN_EVERY_MS = 30000; // burn-in verdicts change rarely
  const LOG_TAIL_BYTES = 16384;
  const TOKEN_KEY = 'gpuherd.token';
  const PREFS_KEY = 'gpuherd.prefs';
  const COLORS = { util: '#1f77b4', mem: '#9467bd', temp: '#d62728', power: '#ff7f0e' };

  const state = {
    token: null,
    route: { view: 'fleet' },
    fleet: null,
    health: null,
    jobs: [],
    showFinished: false,
    burnins: new Map(),        // GPU uuid -> latest burn-in run
    burninsAt: 0,
    alerts: [],
    events: [],
    lastEventId: 0,
    history: new Map(),        // GPU index -> {time, gpu_util_pct, mem_used_pct, temp_c, power_w}
    historyNow: 0,
    historyAt: 0,              // when a rollup window was last fetched
    range: 3600,               // seconds the fleet's charts span
    layout: '',                // 'cards' or 'dense'; '' = by fleet size
    utc: true,                 // times in UTC, like the CLI; false = this browser's zone
    pipelines: null,
    pipeline: null,
    job: null,
    jobMetrics: null,
    log: { jobId: 0, stream: 'stdout', text: '', offset: -1 },
    cards: new Map(),          // GPU index -> {root, fields, charts}
    rendered: '',              // key of what the current table view shows
    pollTimer: null,
    polling: false,
  };

  // ---- helpers ----------------------------------------------------------

  // Builds an element; strings become text nodes, never HTML.
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') node.className = v;
      else if (k === 'text') node.textContent = v;
      else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    for (const c of children.flat()) node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return node;
  }

  function fmt(v, digits = 0, unit = '') {
    return v === undefined || v === null || Number.isNaN(v) ? '–' : `${Number(v).toFixed(digits)}${unit}`;
  }

  function gib(bytes) { return bytes === undefined || bytes === null ? '–' : (bytes / 1073741824).toFixed(1); }

  function ago(ms, now) {
    if (!ms) return '–';
    const s = Math.max(0, Math.round(((now || Date.now()) - ms) / 1000));
    if (s < 60) return `${s} s ago`;
    if (s < 3600) return `${Math.floor(s / 60)} min ago`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min ago`;
    return dateTime(ms);
  }

  function zone() { return state.utc ? { timeZone: 'UTC', hourCycle: 'h23' } : { hourCycle: 'h23' }; }
  function zoneName() { return state.utc ? 'UTC' : 'local'; }

  function clock(ms) {
    return ms ? new Date(ms).toLocaleTimeString('en-GB', Object.assign({ hour: '2-digit', minute: '2-digit', second: '2-digit' }, zone())) : '–';
  }

  function dateTime(ms) {
    return ms ? new Date(ms).toLocaleString('en-GB', Object.assign({ month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit' }, zone())) : '–';
  }

  function loadPrefs() {
    try {
      const p = JSON.parse(localStorage.getItem(PREFS_KEY) || '{}');
      if (typeof p.utc === 'boolean') state.utc = p.utc;
      if (RANGES.some(([, s]) => s === p.range)) state.range = p.range;
      if (['cards', 'dense'].includes(p.layout)) state.layout = p.layout;
    } catch (e) { /* unreadable: the defaults */ }
  }

  function savePrefs() {
    localStorage.setItem(PREFS_KEY, JSON.stringify({ utc: state.utc, range: state.range, layout: state.layout }));
  }

  // A job's GPU memory on one GPU: "3.1 / 8.0 GiB" for a fraction (used of its share).
  function jobMemory(j) {
    if (!j) return '';
    if (j.share_bytes) return `${gib(j.used_bytes)} / ${gib(j.share_bytes)} GiB`;
    return j.used_bytes !== undefined ? `${gib(j.used_bytes)} GiB` : '';
  }

  // A job's GPUs from twentieths: 20 → "1", 10 → "0.5", 5 → "0.25", 1 → "0.05".
  function twentieths(t) { return String(Number((t / 20).toFixed(2))); }

  function notice(text, kind) {
    const box = document.getElementById('notice');
    box.textContent = text;
    box.className = `notice ${kind || 'info'}`;
    box.hidden = !text;
  }

  async function api(path, options = {}) {
    const headers = Object.assign({}, options.headers || {});
    if (state.token) headers.Authorization = `Bearer ${state.token}`;
    if (options.body !== undefined) headers['Content-Type'] = 'application/json';
    const response = await fetch(path, {
      method: options.method || 'GET',
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      cache: 'no-store',
    });
    if (options.raw) return response;
    let body = null;
    try { body = await response.json(); } catch (e) { body = null; }
    if (!response.ok) {
      const message = body && body.error ? body.error : `${response.status} ${response.statusText}`;
      const error = new Error(message);
      error.status = response.status;
      throw error;
    }
    return body;
  }

  // ---- the token ----------------------------------------------------------

  function loadToken() {
    const match = location.hash.match(/(?:^#|&)token=([^&]+)/);
    if (match) {
      localStorage.setItem(TOKEN_KEY, decodeURIComponent(match[1]));
      // Out of the address bar and the history once it is kept.
      history.replaceState(null, '', `${location.pathname}#/fleet`);
    }
    state.token = localStorage.getItem(TOKEN_KEY);
  }

  function renderAuth() {
    const box = document.getElementById('auth');
    box.replaceChildren();
    if (state.token) {
      box.append(el('span', { class: 'auth-on', 'data-testid': 'auth-state', text: 'token set: actions enabled' }),
        el('button', { type: 'button', 'data-testid': 'token-forget', onclick: () => {
          localStorage.removeItem(TOKEN_KEY);
          state.token = null;
          afterTokenChange();
        } }, 'Forget token'));
      return;
    }
    const input = el('input', { type: 'password', placeholder: 'API token (actions)', autocomplete: 'off',
      'data-testid': 'token-input', 'aria-label': 'API token' });
    const use = () => {
      const value = input.value.trim();
      if (!value) return;
      localStorage.setItem(TOKEN_KEY, value);
      state.token = value;
      afterTokenChange();
    };
    input.addEventListener('keydown', (e) => { if (e.key === 'Enter') use(); });
    box.append(el('span', { class: 'auth-off', 'data-testid': 'auth-state',
      title: 'The token is in the state directory (api-token, mode 0600); `gpuherd dashboard` prints a link with it.',
      text: 'read-only' }), input,
    el('button', { type: 'button', 'data-testid': 'token-save', onclick: use }, 'Use token'));
  }

  function afterTokenChange() {
    renderAuth();
    state.rendered = '';
    state.pipelines = null;
    for (const card of state.cards.values()) card.key = '';
    notice('');
    poll();
  }

  // A button that needs the token: disabled without it, and says why.
  function actionButton(label, testid, run) {
    const button = el('button', { type: 'button', class: 'action', 'data-testid': testid,
      disabled: !state.token, title: state.token ? label : 'read-only: paste the API token to act' }, label);
    button.addEventListener('click', async () => {
      button.disabled = true;
      try {
        const text = await run();
        notice(text, 'ok');
      } catch (e) {
        notice(`${label} refused: ${e.message}`, 'error');
      } finally {
        state.rendered = '';
        await poll();
      }
    });
    return button;
  }

  // ---- routing ------------------------------------------------------------

  function parseRoute() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter(Boolean);
    const view = parts[0] || 'fleet';
    if (view === 'jobs' && parts[1]) return { view: 'job', id: Number(parts[1]) };
    if (view === 'pipelines' && parts[1]) return { view: 'pipeline', id: Number(parts[1]) };
    if (['fleet', 'queue', 'pipelines', 'alerts'].includes(view)) return { view };
    return { view: 'fleet' };
  }

  function onRoute() {
    if (/token=/.test(location.hash)) loadToken();
    state.route = parseRoute();
    state.rendered = '';
    state.cards.clear();
    state.job = null;
    state.jobMetrics = null;
    state.pipeline = null;
    // The fleet's range and the job's hour are different windows.
    state.history.clear();
    state.historyNow = 0;
    state.historyAt = 0;
    document.getElementById('view').replaceChildren();
    const top = { job: 'queue', pipeline: 'pipelines' }[state.route.view] || state.route.view;
    for (const a of document.querySelectorAll('nav a')) a.classList.toggle('active', a.dataset.view === top);
    poll();
  }

  // ---- data ---------------------------------------------------------------

  function mergeHistory(body) {
    const cutoff = body.now - Math.max(state.range, READINGS_S) * 1000;
    for (const g of body.gpus) {
      let h = state.history.get(g.index);
      if (!h) {
        h = { time: [], gpu_util_pct: [], mem_used_pct: [], temp_c: [], power_w: [] };
        state.history.set(g.index, h);
      }
      for (const key of Object.keys(h)) h[key].push(...g[key]);
      let drop = 0;
      while (drop < h.time.length && h.time[drop] < cutoff) drop++;
      if (drop) for (const key of Object.keys(h)) h[key].splice(0, drop);
    }
    state.historyNow = body.now;
  }

  async function fetchHistory(seconds) {
    if (seconds > READINGS_S) {
      if (state.historyAt && Date.now() - state.historyAt < ROLLUP_REFRESH_MS) return;
      const body = await api(`/v1/gpus/history?seconds=${seconds}`);
      state.history.clear();
      mergeHistory(body);
      state.historyAt = Date.now();
      return;
    }
    const since = state.historyNow ? `&since=${lastSampleTime()}` : '';
    mergeHistory(await api(`/v1/gpus/history?seconds=${seconds}${since}`));
  }

  function setRange(seconds) {
    state.range = seconds;
    state.history.clear();
    state.historyNow = 0;
    state.historyAt = 0;
    savePrefs();
    redrawFleet();
  }

  function redrawFleet() {
    state.cards.clear();
    state.rendered = '';
    document.getElementById('view').replaceChildren();
    poll();
  }

  function lastSampleTime() {
    let last = 0;
    for (const h of state.history.values()) if (h.time.length) last = Math.max(last, h.time[h.time.length - 1]);
    return last || state.historyNow;
  }

  async function fetchBurnins(force) {
    if (!force && Date.now() - state.burninsAt < BURNIN_EVERY_MS) return;
    const body = await api('/v1/burnin/runs?latest=1');
    state.burnins = new Map(body.runs.map((r) => [r.gpu_uuid, r]));
    state.burninsAt = Date.now();
  }

  async function fetchEvents() {
    const body = await api(`/v1/events?limit=200${state.lastEventId ? `&after=${state.lastEventId}` : ''}`);
    for (const e of body.events) state.events.push(e);
    if (state.events.length > 500) state.events.splice(0, state.events.length - 500);
    if (state.events.length) state.lastEventId = state.events[state.events.length - 1].id;
  }

  async function fetchLog(id, running) {
    const log = state.log;
    if (log.jobId !== id) Object.assign(log, { jobId: id, text: '', offset: -1 });
    if (log.offset < 0) {
      // The end of the file first, then its last LOG_TAIL_BYTES.
      const end = await api(`/v1/jobs/${id}/logs?stream=${log.stream}&offset=1000000000000000`);
      log.offset = Math.max(0, end.next_offset - LOG_TAIL_BYTES);
      log.cut = log.offset > 0;
    } else if (!running && log.done) {
      return;
    }
    for (let i = 0; i < 8; i++) {
      const piece = await api(`/v1/jobs/${id}/logs?stream=${log.stream}&offset=${log.offset}`);
      log.text += piece.data;
      log.offset = piece.next_offset;
      if (!piece.truncated) { log.done = piece.final; break; }
    }
    if (log.text.length > 4 * LOG_TAIL_BYTES) {
      log.text = log.text.slice(log.text.length - 4 * LOG_TAIL_BYTES);
      log.cut = true;
    }
  }

  async function poll() {
    if (state.polling) return;
    state.polling = true;
    clearTimeout(state.pollTimer);
    const route = state.route;
    try {
      const wants = [api('/v1/health'), api('/v1/gpus'), api(`/v1/jobs${state.showFinished ? '?all=1' : ''}`),
        api('/v1/alerts?all=1')];
      const [health, fleet, jobs, alerts] = await Promise.all(wants);
      state.health = health;
      state.fleet = fleet;
      state.jobs = jobs.jobs;
      state.alerts = alerts.alerts;
      if (route.view === 'fleet') await fetchHistory(state.range);
      if (route.view === 'job') await fetchHistory(READINGS_S);
      if (route.view === 'fleet') await fetchBurnins(false);
      if (route.view === 'alerts') await fetchEvents();
      if (route.view === 'pipelines') state.pipelines = (await api('/v1/pipelines?all=1')).pipelines;
      if (route.view === 'pipeline') {
        try {
          state.pipeline = await api(`/v1/pipelines/${route.id}`);
          state.pipelineError = null;
        } catch (e) {
          state.pipeline = null;
          state.pipelineError = e;
        }
      }
      if (route.view === 'job') {
        try {
          state.job = await api(`/v1/jobs/${route.id}`);
          state.jobError = null;
          try {
            state.jobMetrics = (await api(`/v1/jobs/${route.id}/metrics`)).metrics;
            await fetchLog(route.id, !['completed', 'failed', 'cancelled'].includes(state.job.state));
            state.jobPrivate = null;
          } catch (e) {
            // A job's output and metric lines are its owner's: over TCP they need the token.
            if (e.status !== 401 && e.status !== 403) throw e;
            state.jobMetrics = [];
            state.jobPrivate = e.message;
          }
        } catch (e) {
          state.job = null;
          state.jobError = e;
        }
      }
      if (route === state.route) render();
      if (route === state.route && route.view === 'fleet') refreshOpenPassports();
      const at = `${clock(Date.now())} ${zoneName()}`;
      document.getElementById('status-line').textContent =
        `${fleet.hostname || ''} · ${fleet.gpus.length} GPUs (${fleet.driver}) · daemon ${health.status} · updated ${at} · every ${POLL_MS / 1000} s`;
      document.getElementById('status-line').classList.remove('stale');
    } catch (e) {
      document.getElementById('status-line').textContent = `cannot reach the daemon: ${e.message}; retrying`;
      document.getElementById('status-line').classList.add('stale');
    } finally {
      state.polling = false;
      if (!document.hidden) state.pollTimer = setTimeout(poll, POLL_MS);
    }
  }

  // ---- rendering ----------------------------------------------------------

  function render() {
    const fleet = state.fleet;
    document.getElementById('host').textContent = fleet.hostname ? `on ${fleet.hostname}` : '';
    const banner = document.getElementById('sim-banner');
    banner.hidden = !fleet.simulated;
    banner.textContent = fleet.simulated ? `SIMULATED FLEET: ${fleet.sim_reason}` : '';
    const firing = state.alerts.filter((a) => a.state === 'firing').length;
    const count = document.getElementById('alert-count');
    count.hidden = firing === 0;
    count.textContent = String(firing);
    const view = document.getElementById('view');
    switch (state.route.view) {
      case 'fleet': return renderFleet(view);
      case 'queue': return renderTable(view, renderQueue);
      case 'pipelines': return renderTable(view, renderPipelines);
      case 'pipeline': return renderTable(view, renderPipeline);
      case 'alerts': return renderTable(view, renderAlerts);
      case 'job': return renderJob(view);
      default: return undefined;
    }
  }

  // Rebuilds a table view only when what it shows has changed, so that a
  // button is not replaced under the pointer every few seconds.
  function renderTable(view, build) {
    const { key, nodes } = build();
    if (key !== state.rendered) {
      state.rendered = key;
      view.replaceChildren(...nodes);
    }
    // Ages change every poll; they are updated in place.
    for (const cell of view.querySelectorAll('[data-since]')) cell.textContent = ago(Number(cell.dataset.since));
  }

  function jobsOn(index) {
    return state.jobs.filter((j) => ['running', 'stopping'].includes(j.state) && (j.assigned_gpus || []).includes(index));
  }

  function stateBadge(text, extra) {
    return el('span', { class: `badge state-${String(text).replace(/[^a-z_-]/gi, '')}`, 'data-testid': extra }, text);
  }

  // Self-healing's state of a GPU (health_state on /v1/gpus): a badge when it
  // is anything but in service, and a line saying since when and why.
  const HEAL_WORDS = { in_service: 'in service', suspect: 'suspect', quarantined: 'quarantined',
    requalifying: 'requalifying', retired: 'retired' };
  function healBadge(gpu) {
    const h = gpu.health_state;
    if (!h || !h.state || h.state === 'in_service') return null;
    return el('span', { class: `badge heal-${String(h.state).replace(/[^a-z_]/g, '')}`, 'data-testid': 'gpu-heal-badge',
      title: healLine(gpu) }, HEAL_WORDS[h.state] || h.state);
  }
  function healLine(gpu) {
    const h = gpu.health_state;
    if (!h || !h.state) return '';
    const since = h.since ? ` since ${dateTime(h.since)} ${zoneName()} (${ago(h.since)})` : '';
    const why = h.reason ? `: ${h.reason}` : '';
    const job = h.requalify_job ? ` · burn-in job #${h.requalify_job}` : '';
    const rule = h.rule && !['requalify', 'timer', 'operator'].includes(h.rule) ? ` [rule ${h.rule}]` : '';
    return `${HEAL_WORDS[h.state] || h.state}${since}${why}${rule}${job}`;
  }

  // Tick labels for a time axis spanning `span` seconds, in the chosen zone:
  // seconds while it spans minutes, dates once it spans days.
  function axisTimes(span, ticks) {
    const parts = span < 600 ? { hour: '2-digit', minute: '2-digit', second: '2-digit' }
      : span < 86400 * 1.5 ? { hour: '2-digit', minute: '2-digit' }
        : { month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' };
    return ticks.map((t) => new Date(t * 1000).toLocaleString('en-GB', Object.assign(parts, zone())));
  }

  function chart(width, height, series, scales, axes) {
    if (!window.uPlot) return null;
    // Hours and minutes; seconds too while the charts span only minutes.
    const hhmm = (u, ticks) => axisTimes(u.scales.x.max - u.scales.x.min, ticks);
    const opts = {
      width, height,
      legend: { show: false },
      cursor: { drag: { x: false, y: false } },
      // The x axis spans the chosen range, however few readings there are yet.
      scales: Object.assign({ x: { time: true, range: () => [state.historyNow / 1000 - state.range, state.historyNow / 1000] } }, scales),
      series: [{}, ...series.map((x) => Object.assign({ points: { show: false }, spanGaps: false }, x))],
      axes: [{ size: 22, font: '10px sans-serif', ticks: { size: 3 }, values: hhmm, space: 70 }, ...axes],
    };
    return (target) => new window.uPlot(opts, [[], ...series.map(() => [])], target);
  }

  function makeCard(gpu) {
    const fields = {};
    const field = (name, label) => {
      fields[name] = el('span', { class: 'value', 'data-testid': `gpu-${name}` });
      return el('div', { class: 'field' }, el('span', { class: 'label' }, label), fields[name]);
    };
    const chartsBox = el('div', { class: 'charts' });
    let card = null;
    const root = el('section', { class: 'gpu-card', 'data-testid': 'gpu-card', 'data-gpu': gpu.index },
      el('div', { class: 'card-head' },
        el('h2', {}, `GPU ${gpu.index}`, el('span', { class: 'model' }, gpu.name)),
        fields.state = el('span', { 'data-testid': 'gpu-state' })),
      el('div', { class: 'fields' },
        field('util', 'util'), field('mem', 'memory'), field('temp', 'temp'), field('power', 'power'),
        field('pcie', 'PCIe'), field('health', 'health'), field('fan', 'fan'), field('throttle', 'throttle')),
      fields.heal = el('div', { class: 'heal-line', 'data-testid': 'gpu-heal' }),
      chartsBox,
      fields.jobs = el('div', { class: 'jobs-on', 'data-testid': 'gpu-jobs' }),
      fields.passport = el('details', { class: 'passport', 'data-testid': 'gpu-passport',
        ontoggle: (e) => { if (e.target.open) loadPassport(gpu.index, card); } },
      el('summary', {}, 'passport'), el('div', { class: 'passport-body' }, el('span', { class: 'muted' }, 'loading…'))),
      fields.actions = el('div', { class: 'card-actions' }));
    const charts = [];
    const boxes = [];
    const width = 340;
    const util = chart(width, 90,
      [{ label: 'util %', stroke: COLORS.util, scale: '%', width: 1.5 }, { label: 'mem %', stroke: COLORS.mem, scale: '%', width: 1.5 }],
      { '%': { range: [0, 100] } },
      [{ scale: '%', size: 44, font: '10px sans-serif', values: (u, v) => v.map((x) => `${x}%`) }]);
    const heat = chart(width, 90,
      [{ label: '°C', stroke: COLORS.temp, scale: 'c', width: 1.5 }, { label: 'W', stroke: COLORS.power, scale: 'w', width: 1.5 }],
      { c: { range: (u, min, max) => [Math.min(20, min ?? 20), Math.max(90, max ?? 90)] }, w: { range: (u, min, max) => [0, Math.max(50, (max ?? 50) * 1.1)] } },
      [{ scale: 'c', size: 44, font: '10px sans-serif', values: (u, v) => v.map((x) => `${x}°`) },
        { scale: 'w', side: 1, size: 46, font: '10px sans-serif', values: (u, v) => v.map((x) => `${x}W`), grid: { show: false } }]);
    if (util && heat) {
      const key = (a, b, c, d) => el('div', { class: 'chart-key' },
        el('i', { style: `background:${a}` }), b, el('i', { style: `background:${c}` }), d);
      const box1 = el('div', { class: 'chart', 'data-testid': 'gpu-chart' });
      const box2 = el('div', { class: 'chart', 'data-testid': 'gpu-chart' });
      chartsBox.append(key(COLORS.util, 'utilization %', COLORS.mem, 'memory %'), box1,
        key(COLORS.temp, 'temperature °C', COLORS.power, 'power W'), box2);
      charts.push(util(box1), heat(box2));
      boxes.push(box1, box2);
    } else {
      chartsBox.append(el('p', { class: 'muted' }, 'Charts are missing: this gpuherd was built without npm (uPlot).'));
    }
    card = { root, fields, charts, boxes, key: '', passportKey: '', passportLoading: false };
    return card;
  }

  // Open passports follow the card: read again on every poll (a new incident,
  // a state change), never for a closed card.
  function refreshOpenPassports() {
    for (const [index, card] of state.cards) {
      if (card.fields.passport.open) loadPassport(index, card);
    }
  }

  // The card's passport (GET /v1/gpus/{id}/passport), read when opened and
  // while it stays open. One read at a time per card; an unchanged passport
  // leaves the page alone (a selection in it survives).
  async function loadPassport(index, card) {
    if (card.passportLoading) return;
    const box = card.fields.passport;
    const body = box.querySelector('.passport-body');
    let p;
    card.passportLoading = true;
    try {
      p = await api(`/v1/gpus/${index}/passport`);
    } catch (e) {
      card.passportKey = '';
      body.replaceChildren(el('span', { class: 'warn' }, `cannot read the passport: ${e.message}`));
      return;
    } finally {
      card.passportLoading = false;
    }
    const key = JSON.stringify(p);
    if (key === card.passportKey) return;
    card.passportKey = key;
    const row = (label, value) => el('div', { class: 'field' }, el('span', { class: 'label' }, label), el('span', { class: 'value' }, value));
    const last = (list, n) => (list || []).slice(-n).reverse();
    body.replaceChildren(
      el('div', { class: 'fields' },
        row('card', p.serial ? `serial ${p.serial}` : p.uuid || p.key),
        row('first seen', p.first_seen ? dateTime(p.first_seen) : '–'),
        row('hours read', fmt(p.hours_in_service, 1)),
        row('requalified', `${p.requalifications_passed || 0} passed, ${p.requalifications_failed || 0} failed`)),
      el('div', { class: 'label' }, `incidents (${(p.incidents || []).length}, newest first)`),
      ...last(p.incidents, 5).map((i) => el('div', { class: 'passport-line', 'data-testid': 'passport-incident' },
        `${dateTime(i.time)} ${i.kind}${i.xid ? ` ${i.xid}` : ''}: ${i.message}`)),
      el('div', { class: 'label' }, `state changes (${(p.states || []).length}, newest first)`),
      ...last(p.states, 5).map((c) => el('div', { class: 'passport-line', 'data-testid': 'passport-state' },
        `${dateTime(c.time)} ${c.from} → ${c.to}${c.shadow ? ' (shadow)' : ''}: ${c.reason}`)),
      el('div', { class: 'label' }, `burn-ins (${(p.burnins || []).length})`),
      ...last(p.burnins, 3).map((b) => el('div', { class: 'passport-line' },
        `${dateTime(b.finished)} level ${b.level} ${b.outcome} ${b.verdict} ${b.score}`)),
      el('div', { class: 'muted' }, `gpuherd passport ${index} --json exports it; --html ${'FILE'} writes a page`));
  }

  function fleetLayout() {
    if (state.layout) return state.layout;
    return state.fleet.gpus.length > DENSE_ABOVE ? 'dense' : 'cards';
  }

  function fleetToolbar(layout) {
    const button = (label, on, testid, click) => el('button', { type: 'button', class: on ? 'on' : '', 'data-testid': testid,
      'aria-pressed': on ? 'true' : 'false', onclick: click }, label);
    return el('div', { class: 'toolbar fleet-toolbar' },
      el('span', { class: 'muted' }, 'view'),
      button('cards', layout === 'cards', 'layout-cards', () => { state.layout = 'cards'; savePrefs(); redrawFleet(); }),
      button('table', layout === 'dense', 'layout-dense', () => { state.layout = 'dense'; savePrefs(); redrawFleet(); }),
      el('span', { class: 'muted sep' }, 'range'),
      ...RANGES.map(([label, seconds]) => button(label, state.range === seconds, `range-${label.replace(' ', '')}`,
        () => setRange(seconds))),
      el('span', { class: 'muted', 'data-testid': 'range-source' },
        state.range > READINGS_S ? 'per-minute rollups' : 'readings'));
  }

  function renderFleet(view) {
    const fleet = state.fleet;
    const layout = fleetLayout();
    const key = `${layout}:${state.range}:${state.utc}`;
    if (!view.querySelector('.fleet, .dense') || view.dataset.fleetKey !== key) {
      view.dataset.fleetKey = key;
      view.replaceChildren(fleetToolbar(layout),
        layout === 'dense' ? denseTable() : el('div', { class: 'fleet', 'data-testid': 'fleet' }));
      state.cards.clear();
    }
    if (layout === 'dense') {
      updateDense(view);
      return;
    }
    const grid = view.querySelector('.fleet');
    for (const gpu of fleet.gpus) {
      let card = state.cards.get(gpu.index);
      if (!card) {
        card = makeCard(gpu);
        state.cards.set(gpu.index, card);
        grid.append(card.root);
      }
      updateCard(card, gpu);
    }
  }

  // ---- the dense view: one line per GPU, a utilization heatmap over the range

  const HEAT_W = 240;
  const HEAT_H = 11;

  function denseTable() {
    return el('table', { class: 'dense', 'data-testid': 'fleet-dense' },
      el('thead', {}, el('tr', {}, ['GPU', 'model', 'state', 'util', 'memory', 'temp', 'power', 'health',
        el('span', { 'data-testid': 'heat-head' }, `utilization, last ${RANGES.find(([, x]) => x === state.range)[0]}`),
        'jobs (used / share)'].map((h) => el('th', {}, h)))),
      el('tbody', {}));
  }

  function meter(pct, text) {
    const box = el('span', { class: 'meter' }, el('i', { style: `width:${Math.max(0, Math.min(100, pct || 0))}%` }));
    return el('span', { class: 'meter-cell' }, box, el('span', { class: 'num' }, text));
  }

  // Utilization 0..100 as a colour from pale to dark blue; no reading: grey.
  function heatColor(v) {
    if (v === null || v === undefined) return '#e5e7eb';
    const t = Math.max(0, Math.min(100, v)) / 100;
    const mix = (a, b) => Math.round(a + (b - a) * t);
    return `rgb(${mix(232, 8)},${mix(240, 48)},${mix(251, 107)})`;
  }

  function drawHeat(canvas, h) {
    const ctx = canvas.getContext('2d');
    ctx.clearRect(0, 0, HEAT_W, HEAT_H);
    ctx.fillStyle = '#f3f4f6';
    ctx.fillRect(0, 0, HEAT_W, HEAT_H);
    if (!h || !h.time.length) return 0;
    const end = state.historyNow;
    const start = end - state.range * 1000;
    const x = (t) => ((t - start) / (end - start)) * HEAT_W;
    for (let k = 0; k < h.time.length; k++) {
      const x0 = Math.max(0, x(h.time[k]));
      const x1 = k + 1 < h.time.length ? x(h.time[k + 1]) : HEAT_W;
      ctx.fillStyle = heatColor(h.gpu_util_pct[k]);
      ctx.fillRect(x0, 0, Math.max(1, Math.min(x1, HEAT_W) - x0), HEAT_H);
    }
    return h.time.length;
  }

  function updateDense(view) {
    const body = view.querySelector('.dense tbody');
    const rows = new Map([...body.children].map((r) => [Number(r.dataset.gpu), r]));
    for (const gpu of state.fleet.gpus) {
      let row = rows.get(gpu.index);
      if (!row) {
        row = el('tr', { 'data-testid': 'gpu-row', 'data-gpu': gpu.index });
        for (let i = 0; i < 10; i++) row.append(el('td', {}));
        row.children[8].append(el('canvas', { width: HEAT_W, height: HEAT_H, class: 'heat', 'data-testid': 'gpu-heat' }));
        body.append(row);
      }
      const s = gpu.state === 'lost' ? {} : (gpu.sample || {});
      const c = row.children;
      const total = s.mem_total_bytes ?? gpu.memory_total_bytes;
      c[0].textContent = String(gpu.index);
      c[1].textContent = gpu.name;
      c[1].className = 'model-cell';
      c[2].replaceChildren(stateBadge(gpu.state || 'ok', 'gpu-state-badge'), ...[healBadge(gpu)].filter(Boolean));
      c[2].title = [gpu.drained ? `drained${gpu.drain_origin ? ` (${gpu.drain_origin})` : ''}: ${gpu.drain_reason || 'no reason given'}`
        : gpu.state === 'lost' ? `lost: ${gpu.last_error || ''}; last answered ${dateTime(gpu.last_seen)} ${zoneName()}` : '',
      gpu.health_state && gpu.health_state.state !== 'in_service' ? `self-heal: ${healLine(gpu)}` : ''].filter(Boolean).join('\n');
      c[3].replaceChildren(meter(s.gpu_util_pct, fmt(s.gpu_util_pct, 0, ' %')));
      c[3].dataset.testid = 'gpu-util';
      const memPct = s.mem_used_bytes !== undefined && total ? (100 * s.mem_used_bytes) / total : null;
      c[4].replaceChildren(meter(memPct, s.mem_used_bytes !== undefined ? `${gib(s.mem_used_bytes)}/${gib(total)} GiB` : '–'));
      c[5].textContent = fmt(s.temp_c, 0, ' °C');
      c[5].className = 'num';
      c[6].textContent = fmt(s.power_w, 0, ' W');
      c[6].className = 'num';
      c[7].textContent = gpu.health_score !== undefined ? `${gpu.health_score} ${gpu.health_verdict}` : '–';
      c[7].className = gpu.health_score !== undefined ? `verdict-${gpu.health_verdict}` : 'muted';
      const points = drawHeat(c[8].firstChild, state.history.get(gpu.index));
      c[8].firstChild.dataset.points = String(points);
      const jobs = gpu.jobs || [];
      const jobsKey = JSON.stringify(jobs);
      if (c[9].dataset.key !== jobsKey) {
        c[9].dataset.key = jobsKey;
        c[9].replaceChildren(...jobs.map((j) => el('a', { href: `#/jobs/${j.id}`, class: 'job-chip', 'data-testid': 'gpu-job' },
          `#${j.id} ${j.user}${jobMemory(j) ? ` ${jobMemory(j)}` : ''}`)));
      }
    }
  }

  function updateCard(card, gpu) {
    // A lost GPU's last reading is stale: every reading shows "–".
    const s = gpu.state === 'lost' ? {} : (gpu.sample || {});
    const f = card.fields;
    const stateText = gpu.state || 'ok';
    f.state.replaceChildren(stateBadge(stateText, 'gpu-state-badge'), ...[healBadge(gpu)].filter(Boolean));
    const healing = gpu.health_state && gpu.health_state.state;
    const line = healing && (healing !== 'in_service' || gpu.health_state.since) ? healLine(gpu) : '';
    f.heal.textContent = line ? `self-heal: ${line}` : '';
    f.heal.className = `heal-line${healing && healing !== 'in_service' ? ` heal-${String(healing).replace(/[^a-z_]/g, '')}` : ' muted'}`;
    f.heal.hidden = !line;
    f.state.title = gpu.drained ? `drained${gpu.drain_origin ? ` (${gpu.drain_origin})` : ''}: ${gpu.drain_reason || 'no reason given'}`
      : gpu.state === 'lost' ? `lost: ${gpu.last_error || ''}; last answered ${dateTime(gpu.last_seen)} ${zoneName()}` : '';
    f.util.textContent = fmt(s.gpu_util_pct, 0, ' %');
    f.mem.textContent = s.mem_used_bytes === undefined ? '–' : `${gib(s.mem_used_bytes)} / ${gib(s.mem_total_bytes ?? gpu.memory_total_bytes)} GiB`;
    f.temp.textContent = fmt(s.temp_c, 0, ' °C');
    f.power.textContent = s.power_w === undefined ? '–' : `${fmt(s.power_w, 0)} / ${fmt(s.power_limit_w ?? gpu.power_limit_default_w, 0)} W`;
    const gen = s.pcie_gen; const width = s.pcie_width;
    const low = (width && gpu.max_pcie_width && width < gpu.max_pcie_width);
    f.pcie.textContent = gen ? `Gen${gen} x${width}${low ? ` (max x${gpu.max_pcie_width})` : ''}` : '–';
    f.pcie.classList.toggle('warn', Boolean(low));
    const burnin = state.burnins.get(gpu.uuid);
    if (gpu.health_score !== undefined) {
      f.health.textContent = `${gpu.health_verdict} ${gpu.health_score}/100`;
      f.health.className = `value verdict-${gpu.health_verdict}`;
      f.health.title = `latest burn-in, ${ago(gpu.health_at)}`;
    } else if (burnin && burnin.health) {
      f.health.textContent = `${burnin.health.verdict} ${fmt(burnin.health.score, 0)}/100`;
      f.health.className = `value verdict-${burnin.health.verdict}`;
      f.health.title = `level ${burnin.level} burn-in, ${ago(burnin.finished)}`;
    } else {
      f.health.textContent = 'not screened';
      f.health.className = 'value muted';
      f.health.title = 'no burn-in recorded: gpuherd burnin --level 1';
    }
    // The failure-risk model's score, where it has scored this GPU.
    if (typeof gpu.failure_risk === 'number') {
      f.health.append(el('span', { class: gpu.failure_risk >= 0.5 ? 'warn' : 'muted', 'data-testid': 'gpu-risk' },
        ` · risk ${fmt(gpu.failure_risk * 100, 0, ' %')}`));
    }
    f.fan.textContent = fmt(s.fan_pct, 0, ' %');
    // "idle" is the driver lowering clocks with nothing to do, not a fault.
    const throttle = typeof s.throttle === 'string' ? s.throttle : '';
    const slowing = throttle.split(/[,\s]+/).filter((x) => x && x !== 'idle' && x !== 'none');
    f.throttle.textContent = gpu.state === 'lost' ? '–' : throttle || 'none';
    f.throttle.classList.toggle('warn', slowing.length > 0);

    const jobs = jobsOn(gpu.index);
    const onGpu = new Map((gpu.jobs || []).map((j) => [j.id, j]));
    const actionsKey = JSON.stringify([Boolean(state.token), gpu.drained, jobs.map((j) => [j.id, j.name, j.gpu_twentieths]), gpu.jobs]);
    if (actionsKey !== card.key) {
      card.key = actionsKey;
      f.jobs.replaceChildren(jobs.length ? el('span', { class: 'label' }, 'jobs (GPU memory used / share)') : el('span', { class: 'muted' }, 'idle'),
        ...jobs.map((j) => el('a', { href: `#/jobs/${j.id}`, class: 'job-chip', 'data-testid': 'gpu-job' },
          `#${j.id} ${j.user} ${j.name || (j.command || []).join(' ')}${j.gpu_twentieths < 20 ? ` (${twentieths(j.gpu_twentieths)})` : ''}`,
          jobMemory(onGpu.get(j.id)) ? el('span', { class: 'job-mem', 'data-testid': 'gpu-job-mem' }, ` ${jobMemory(onGpu.get(j.id))}`) : null)));
      f.actions.replaceChildren(gpu.drained
        ? actionButton('Undrain', 'gpu-undrain', async () => {
          await api(`/v1/gpus/${gpu.index}/undrain`, { method: 'POST' });
          return `GPU ${gpu.index} returned to work`;
        })
        : actionButton('Drain', 'gpu-drain', async () => {
          await api(`/v1/gpus/${gpu.index}/drain`, { method: 'POST', body: { reason: 'drained from the dashboard' } });
          return `GPU ${gpu.index} drained: no new work goes to it`;
        }));
    }
    const h = state.history.get(gpu.index);
    if (h && card.charts.length) {
      const t = h.time.map((ms) => ms / 1000);
      card.charts[0].setData([t, h.gpu_util_pct, h.mem_used_pct]);
      card.charts[1].setData([t, h.temp_c, h.power_w]);
      for (const box of card.boxes) box.dataset.points = String(t.length);
    }
  }

  function table(headers, rows, testid) {
    return el('table', { 'data-testid': testid },
      el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
      el('tbody', {}, rows));
  }

  function renderQueue() {
    const order = { running: 0, stopping: 1, pending: 2, held: 3 };
    const jobs = [...state.jobs].sort((a, b) => (order[a.state] ?? 9) - (order[b.state] ?? 9) ||
      (a.state === 'pending' ? b.priority - a.priority : 0) || a.id - b.id);
    const key = JSON.stringify(['queue', Boolean(state.token), state.showFinished,
      jobs.map((j) => [j.id, j.state, j.reason, j.assigned_gpus, j.priority])]);
    const counts = {};
    for (const j of jobs) counts[j.state] = (counts[j.state] || 0) + 1;
    const toggle = el('label', { class: 'toggle' },
      el('input', { type: 'checkbox', checked: state.showFinished, onchange: (e) => {
        state.showFinished = e.target.checked;
        state.rendered = '';
        poll();
      } }), ' show finished jobs');
    const rows = jobs.map((j) => {
      const finished = ['completed', 'failed', 'cancelled'].includes(j.state);
      const gpus = j.assigned_gpus && j.assigned_gpus.length ? j.assigned_gpus.join(',') : '';
      return el('tr', { 'data-testid': 'job-row', 'data-job': j.id, 'data-state': j.state },
        el('td', {}, el('a', { href: `#/jobs/${j.id}` }, `#${j.id}`)),
        el('td', {}, j.name || ''),
        el('td', {}, j.user),
        el('td', {}, stateBadge(j.state, 'job-state')),
        el('td', { class: 'num' }, String(j.priority)),
        el('td', {}, `${twentieths(j.gpu_twentieths)} GPU${gpus ? ` on ${gpus}` : ''}`),
        el('td', { 'data-since': j.state === 'pending' || j.state === 'held' ? j.submitted : j.started }),
        el('td', { class: 'reason', 'data-testid': 'job-reason' }, j.reason || ''),
        el('td', { class: 'cmd' }, (j.command || []).join(' ')),
        el('td', {}, finished ? '' : actionButton('Cancel', 'job-cancel', async () => {
          const r = await api(`/v1/jobs/${j.id}/cancel`, { method: 'POST' });
          return `job ${j.id}: ${r.state}`;
        })));
    });
    const summary = Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(' · ') || 'no jobs';
    return { key, nodes: [
      el('div', { class: 'view-head' }, el('h2', {}, 'Queue'), el('span', { class: 'muted', 'data-testid': 'queue-summary' }, summary), toggle),
      jobs.length ? table(['job', 'name', 'user', 'state', 'priority', 'GPUs', 'since', 'why it waits / how it ended', 'command', ''], rows, 'queue-table')
        : el('p', { class: 'muted', 'data-testid': 'queue-empty' }, 'The queue is empty. Submit with: gpuherd submit --gpus 1 -- CMD'),
    ] };
  }

  function renderPipelines() {
    const runs = state.pipelines || [];
    const key = JSON.stringify(['pipelines', Boolean(state.token), runs]);
    const rows = runs.map((p) => el('tr', { 'data-testid': 'pipeline-row' },
      el('td', {}, el('a', { href: `#/pipelines/${p.id}` }, `#${p.id}`)),
      el('td', {}, p.name),
      el('td', {}, p.user),
      el('td', {}, stateBadge(p.state)),
      el('td', {}, p.outcome || ''),
      el('td', {}, `${p.nodes.completed}/${p.nodes.total} done${p.nodes.running ? `, ${p.nodes.running} running` : ''}${p.nodes.failed ? `, ${p.nodes.failed} failed` : ''}`),
      el('td', {}, ago(p.created))));
    const hint = state.token ? 'No pipeline runs yet: gpuherd run examples/pipelines/sweep.yaml'
      : 'Pipeline runs are shown to their owner and to admins: paste the API token to see them.';
    return { key, nodes: [
      el('div', { class: 'view-head' }, el('h2', {}, 'Pipelines')),
      runs.length ? table(['run', 'name', 'user', 'state', 'outcome', 'nodes', 'created'], rows, 'pipelines-table')
        : el('p', { class: 'muted', 'data-testid': 'pipelines-empty' }, hint),
    ] };
  }

  // The DAG: a node's column is the length of the longest chain of needs
  // before it; nodes of a column are stacked in plan order.
  function dag(nodes) {
    const byId = new Map(nodes.map((n, i) => [n.id, i]));
    const depth = new Array(nodes.length).fill(-1);
    const depthOf = (i, seen = new Set()) => {
      if (depth[i] >= 0) return depth[i];
      if (seen.has(i)) return 0;
      seen.add(i);
      let d = 0;
      for (const need of nodes[i].needs || []) if (byId.has(need)) d = Math.max(d, depthOf(byId.get(need), seen) + 1);
      depth[i] = d;
      return d;
    };
    nodes.forEach((_, i) => depthOf(i));
    const columns = [];
    nodes.forEach((n, i) => { (columns[depth[i]] = columns[depth[i]] || []).push(i); });
    const W = 170; const H = 24; const GX = 60; const GY = 8;
    const pos = new Array(nodes.length);
    const tallest = Math.max(...columns.map((c) => c.length));
    columns.forEach((col, x) => col.forEach((i, y) => {
      const offset = ((tallest - col.length) * (H + GY)) / 2;
      pos[i] = { x: 4 + x * (W + GX), y: 4 + offset + y * (H + GY) };
    }));
    const width = 8 + columns.length * (W + GX) - GX;
    const height = 8 + tallest * (H + GY);
    const edges = [];
    nodes.forEach((n, i) => (n.needs || []).forEach((need) => {
      if (!byId.has(need)) return;
      const a = pos[byId.get(need)]; const b = pos[i];
      const x1 = a.x + W; const y1 = a.y + H / 2; const x2 = b.x; const y2 = b.y + H / 2;
      edges.push(svg('path', { d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`, class: 'edge' }));
    }));
    const boxes = nodes.map((n, i) => {
      const label = n.id.length > 26 ? `${n.id.slice(0, 25)}…` : n.id;
      return svg('g', { class: `dag-node state-${n.state}`, 'data-testid': 'dag-node', 'data-state': n.state },
        svg('title', {}, `${n.id}: ${n.state}${n.reason ? ` (${n.reason})` : ''}`),
        svg('rect', { x: pos[i].x, y: pos[i].y, width: W, height: H, rx: 4 }),
        svg('text', { x: pos[i].x + 6, y: pos[i].y + H / 2 + 4 }, label));
    });
    return svg('svg', { width, height, viewBox: `0 0 ${width} ${height}`, class: 'dag', 'data-testid': 'dag' }, edges, boxes);
  }

  async function downloadReport(id, format) {
    const response = await api(`/v1/pipelines/${id}/report?format=${format}`, { raw: true });
    if (!response.ok) {
      let message = `${response.status}`;
      try { message = (await response.json()).error; } catch (e) { /* not JSON */ }
      throw new Error(message);
    }
    const blob = await response.blob();
    const link = el('a', { href: URL.createObjectURL(blob), download: `pipeline-${id}-report.${format}` });
    document.body.append(link);
    link.click();
    link.remove();
    return `report of pipeline ${id} downloaded (${format})`;
  }

  function renderPipeline() {
    const p = state.pipeline;
    const id = state.route.id;
    if (!p) {
      const why = state.pipelineError ? state.pipelineError.message : 'loading…';
      return { key: `pipeline-missing-${why}`, nodes: [el('p', { class: 'muted', 'data-testid': 'pipeline-error' }, why)] };
    }
    const key = JSON.stringify(['pipeline', Boolean(state.token), p.state, p.outcome, p.best_points, p.nodes.map((n) => [n.state, n.attempts, n.job_id, n.best, n.reason, n.objective])]);
    // With an objective, points are listed best first and the best one is named above the table.
    const ranked = Object.keys(p.objectives || {}).length > 0;
    const rankOf = (n) => (n.objective && n.objective.rank) || Infinity;
    const nodes = ranked ? [...p.nodes].sort((a, b) => rankOf(a) - rankOf(b)) : p.nodes;
    const bestLines = Object.entries(p.best_points || {}).map(([step, b]) => el('p', { class: 'best-point', 'data-testid': 'best-point' },
      `Best of ${step} by ${b.metric} (${(p.objectives[step] || {}).mode}): ${b.node} with ${b.metric} = ${Number(b.value).toPrecision(6)} at step ${b.step}`));
    const matrixNames = [...new Set(p.nodes.flatMap((n) => Object.keys(n.matrix || {})))];
    const metricNames = [...new Set(p.nodes.flatMap((n) => Object.keys(n.best || {})))].sort().slice(0, 6);
    const rows = nodes.map((n) => el('tr', { 'data-testid': 'sweep-row' },
      ...(ranked ? [el('td', { class: 'num' }, n.objective && n.objective.rank ? String(n.objective.rank) : '')] : []),
      el('td', {}, n.id), el('td', {}, n.step),
      ...matrixNames.map((m) => el('td', {}, n.matrix && m in n.matrix ? String(n.matrix[m]) : '')),
      el('td', {}, stateBadge(n.state)),
      el('td', { class: 'num' }, String(n.attempts)),
      el('td', {}, n.job_id ? el('a', { href: `#/jobs/${n.job_id}` }, `#${n.job_id}`) : ''),
      ...metricNames.map((m) => el('td', { class: 'num' }, n.best && m in n.best ? Number(n.best[m]).toPrecision(4) : '')),
      el('td', { class: 'reason' }, n.reason || '')));
    const finished = ['completed', 'failed', 'cancelled'].includes(p.state);
    return { key, nodes: [
      el('div', { class: 'view-head' },
        el('h2', {}, `Pipeline #${p.id} ${p.name}`), stateBadge(p.state, 'pipeline-state'),
        el('span', { class: 'muted' }, `${p.outcome || ''} · by ${p.user} · ${ago(p.created)} · ${p.run_dir || ''}`)),
      el('div', { class: 'toolbar' },
        actionButton('Report (HTML)', 'pipeline-report', () => downloadReport(id, 'html')),
        actionButton('Report (CSV)', 'pipeline-report-csv', () => downloadReport(id, 'csv')),
        finished ? null : actionButton('Cancel pipeline', 'pipeline-cancel', async () => {
          const r = await api(`/v1/pipelines/${id}/cancel`, { method: 'POST' });
          return `pipeline ${id}: ${r.state}`;
        })),
      ...bestLines,
      el('div', { class: 'dag-box' }, dag(p.nodes)),
      el('h3', {}, 'Sweep'),
      table([...(ranked ? ['rank'] : []), 'node', 'step', ...matrixNames, 'state', 'attempts', 'job', ...metricNames.map((m) => `best ${m}`), 'reason'], rows, 'sweep-table'),
    ] };
  }

  function renderAlerts() {
    // Firing first (critical before warning, newest first), then resolved;
    // pending alerts, routine until they fire, are folded below.
    const rank = { firing: 0, resolved: 2 };
    const sev = { critical: 0, warning: 1 };
    const shown = state.alerts.filter((a) => a.state !== 'pending').sort((a, b) => (rank[a.state] ?? 1) - (rank[b.state] ?? 1)
      || (sev[a.severity] ?? 2) - (sev[b.severity] ?? 2) || (b.fired_at || 0) - (a.fired_at || 0));
    const pending = state.alerts.filter((a) => a.state === 'pending');
    const alerts = [...shown, ...pending];
    // Alerts' pending transitions are routine: left out of the log unless asked for.
    const routine = (e) => e.kind === 'alert.pending';
    const hidden = state.events.filter(routine).length;
    const events = [...state.events].reverse().filter((e) => state.showPendingEvents || !routine(e)).slice(0, 200);
    const key = JSON.stringify(['alerts', alerts, state.lastEventId, state.utc, state.openPending, state.showPendingEvents]);
    const alertRow = (a) => el('tr', { 'data-testid': 'alert-row', 'data-state': a.state, class: `sev-${a.severity}` },
      el('td', {}, a.rule), el('td', {}, a.gpu === null ? a.subject : `GPU ${a.gpu}`),
      el('td', {}, stateBadge(a.state)), el('td', {}, a.severity),
      el('td', {}, ago(a.fired_at || a.pending_since)), el('td', { class: 'num' }, fmt(a.value, 2)),
      el('td', {}, a.action), el('td', {}, a.summary));
    const alertRows = shown.map(alertRow);
    const headers = ['rule', 'subject', 'state', 'severity', 'since', 'value', 'action', 'summary'];
    const folded = pending.length ? el('details', { class: 'pending-fold', 'data-testid': 'pending-alerts', open: state.openPending,
      ontoggle: (e) => { state.openPending = e.target.open; } },
    el('summary', {}, `${pending.length} pending alert${pending.length === 1 ? '' : 's'}: conditions not held long enough to fire`),
    table(headers, pending.map(alertRow), 'pending-table')) : null;
    const gpuName = new Map((state.fleet.gpus || []).map((g) => [g.uuid, `GPU ${g.index}`]));
    const eventRows = events.map((e) => el('tr', { 'data-testid': 'event-row', class: `sev-${e.severity}` },
      el('td', {}, clock(e.time)), el('td', {}, e.severity), el('td', {}, e.kind),
      el('td', {}, e.gpu_uuid ? gpuName.get(e.gpu_uuid) || e.gpu_uuid : ''), el('td', {}, e.message)));
    return { key, nodes: [
      el('div', { class: 'view-head' }, el('h2', {}, 'Alerts')),
      shown.length ? table(headers, alertRows, 'alerts-table')
        : el('p', { class: 'muted', 'data-testid': 'alerts-empty' }, pending.length ? 'No alert is firing, and none resolved in the last day.'
          : 'No alert is pending or firing, and none resolved in the last day.'),
      folded,
      el('div', { class: 'view-head' }, el('h2', {}, 'Events'), el('span', { class: 'muted' }, `newest first, times ${zoneName()}`),
        hidden ? el('label', { class: 'toggle' }, el('input', { type: 'checkbox', checked: Boolean(state.showPendingEvents),
          'data-testid': 'show-pending-events', onchange: (e) => { state.showPendingEvents = e.target.checked; state.rendered = ''; render(); } }),
        ` show ${hidden} alert-pending event${hidden === 1 ? '' : 's'}`) : null),
      table(['time', 'severity', 'kind', 'GPU', 'message'], eventRows, 'events-table'),
    ] };
  }

  function renderJob(view) {
    const j = state.job;
    if (!j) {
      const why = state.jobError ? state.jobError.message : 'loading…';
      view.replaceChildren(el('p', { class: 'muted', 'data-testid': 'job-error' }, why));
      state.rendered = '';
      return;
    }
    const key = JSON.stringify([j.id, j.state, j.reason, j.attempt, Boolean(state.token), state.log.stream, jobMemoryLine(j), state.utc]);
    if (key !== state.rendered) {
      state.rendered = key;
      const finished = ['completed', 'failed', 'cancelled'].includes(j.state);
      const facts = [
        ['state', stateBadge(j.state, 'job-state')], ['user', j.user], ['priority', String(j.priority)],
        ['GPUs', `${twentieths(j.gpu_twentieths)}${j.assigned_gpus && j.assigned_gpus.length ? ` on ${j.assigned_gpus.join(', ')}` : ''}`],
        ['submitted', ago(j.submitted, j.now)], ['started', j.started ? ago(j.started, j.now) : '–'],
        ['ended', j.ended ? ago(j.ended, j.now) : '–'], ['attempt', `${j.attempt} (restarts ${j.restarts}/${j.max_restarts})`],
        ['exit', j.exit_code !== undefined ? `code ${j.exit_code}` : j.exit_signal !== undefined ? `signal ${j.exit_signal}` : '–'],
        ['GPU memory', jobMemoryLine(j)],
        ['reason', j.reason || '–'], ['command', j.command ? j.command.join(' ') : 'its owner\'s: paste the API token to see it'],
      ];
      const streamButton = (name) => el('button', { type: 'button', class: state.log.stream === name ? 'on' : '',
        onclick: () => { state.log = { jobId: 0, stream: name, text: '', offset: -1 }; state.rendered = ''; poll(); } }, name);
      view.replaceChildren(
        el('div', { class: 'view-head' }, el('h2', { 'data-testid': 'job-title' }, `Job #${j.id} ${j.name || ''}`),
          finished ? null : actionButton('Cancel', 'job-cancel', async () => {
            const r = await api(`/v1/jobs/${j.id}/cancel`, { method: 'POST' });
            return `job ${j.id}: ${r.state}`;
          })),
        el('dl', { class: 'facts' }, facts.flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)])),
        el('h3', {}, 'Metrics'), el('div', { class: 'job-charts', 'data-testid': 'job-metrics' }),
        el('h3', {}, 'GPU utilization while it ran'), el('div', { class: 'job-gpu-chart' }),
        el('div', { class: 'view-head' }, el('h3', {}, 'Log tail'), streamButton('stdout'), streamButton('stderr')),
        el('pre', { class: 'log', 'data-testid': 'job-log' }));
      state.jobCharts = { key: '', charts: [] };
    }
    view.querySelector('.log').textContent = state.jobPrivate ? state.jobPrivate
      : (state.log.cut ? '…\n' : '') + state.log.text;
    renderJobCharts(view, j);
  }

  // Used against share while it runs: from the GPUs' views, else its fence's count.
  function jobMemoryLine(j) {
    const parts = [];
    for (const g of (state.fleet && state.fleet.gpus) || []) {
      const on = (g.jobs || []).find((x) => x.id === j.id);
      if (on && jobMemory(on)) parts.push(`GPU ${g.index}: ${jobMemory(on)}`);
    }
    if (parts.length) return parts.join(' · ');
    const fence = j.memory_fence;
    if (fence) return `${gib(fence.used_bytes)} / ${gib(fence.share_bytes)} GiB (fence ${fence.state})`;
    if (j.gpu_mem_bytes && j.gpu_twentieths % 20 !== 0) return `share ${gib(j.gpu_mem_bytes)} GiB`;
    return '–';
  }

  // The span a job's GPU chart shows: its run, padded, and at least a
  // minute, so a job of a few seconds is not drawn on an axis of years.
  function jobSpan(j, now) {
    const start = j.started / 1000;
    const end = (j.ended || now || Date.now()) / 1000;
    const pad = Math.max(2, (end - start) * 0.05);
    const min = Math.max(60, end - start + 2 * pad);
    const mid = (start + end) / 2;
    return [Math.min(start - pad, mid - min / 2), Math.max(end + pad, mid + min / 2)];
  }

  function renderJobCharts(view, j) {
    if (!window.uPlot) return;
    // Metric curves: one chart per metric name, by step.
    const lines = state.jobMetrics || [];
    const names = [...new Set(lines.flatMap((m) => Object.keys(m.values)
      .filter((k) => !['step', 'epoch', 'time', 'timestamp'].includes(k) && typeof m.values[k] === 'number')))].sort().slice(0, 6);
    const box = view.querySelector('.job-charts');
    const chartsKey = names.join(',');
    if (state.jobCharts.key !== chartsKey) {
      state.jobCharts.key = chartsKey;
      box.replaceChildren();
      state.jobCharts.charts = names.map((name) => {
        const target = el('div', { class: 'chart' }, el('div', { class: 'chart-key' }, name));
        box.append(target);
        return new window.uPlot({ width: 360, height: 140, legend: { show: false }, scales: { x: { time: false } },
          series: [{}, { label: name, stroke: COLORS.util, width: 1.5 }], axes: [{}, { size: 50 }] }, [[], []], target);
      });
      if (!names.length) box.append(el('p', { class: 'muted' }, 'No metric lines (a job writes JSON lines to $GPUHERD_METRICS_FILE).'));
    }
    names.forEach((name, i) => {
      const points = lines.filter((m) => typeof m.values[name] === 'number')
        .map((m, k) => [m.step ?? m.values.step ?? k, m.values[name]]).sort((a, b) => a[0] - b[0]);
      state.jobCharts.charts[i].setData([points.map((p) => p[0]), points.map((p) => p[1])]);
    });
    // Its GPUs' utilization over its run, from the fleet history.
    const gpuBox = view.querySelector('.job-gpu-chart');
    const gpus = j.assigned_gpus || [];
    if (!gpus.length || !j.started) {
      if (!gpuBox.firstChild) gpuBox.append(el('p', { class: 'muted' }, 'It has not run on a GPU yet.'));
      return;
    }
    if (!state.jobCharts.gpu) {
      gpuBox.replaceChildren();
      const target = el('div', { class: 'chart' });
      gpuBox.append(target);
      target.dataset.testid = 'job-gpu-chart';
      state.jobCharts.gpu = new window.uPlot({ width: 720, height: 140, legend: { show: true },
        scales: { x: { time: true, range: () => jobSpan(state.job || j, state.historyNow) }, '%': { range: [0, 100] } },
        series: [{}, ...gpus.map((g, i) => ({ label: `GPU ${g} util %`, scale: '%', stroke: ['#1f77b4', '#2ca02c', '#d62728', '#9467bd'][i % 4], width: 1.5 }))],
        axes: [{ values: (u, ticks) => axisTimes(u.scales.x.max - u.scales.x.min, ticks), space: 80 }, { scale: '%', size: 36 }],
        // What the axis spans once uPlot has set it (tests and people can read it).
        hooks: { setScale: [(u, key) => { if (key === 'x') target.dataset.spanS = String(Math.round(u.scales.x.max - u.scales.x.min)); }] } },
      [[], ...gpus.map(() => [])], target);
    }
    const end = j.ended || Infinity;
    const first = state.history.get(gpus[0]);
    if (!first) return;
    const idx = first.time.map((t, k) => (t >= j.started - 5000 && t <= end ? k : -1)).filter((k) => k >= 0);
    state.jobCharts.gpu.setData([idx.map((k) => first.time[k] / 1000),
      ...gpus.map((g) => { const h = state.history.get(g); return idx.map((k) => (h ? h.gpu_util_pct[k] : null)); })]);
    gpuBox.querySelector('.chart').dataset.points = String(idx.length);
  }

  // ---- start --------------------------------------------------------------

  window.addEventListener('hashchange', onRoute);
  document.addEventListener('visibilitychange', () => { if (!document.hidden) poll(); });
  function renderZone() {
    const button = document.getElementById('tz-toggle');
    button.textContent = state.utc ? 'times: UTC' : 'times: local';
    button.title = state.utc ? 'Show times in this browser\'s time zone' : 'Show times in UTC, as the CLI does';
  }

  window.addEventListener('DOMContentLoaded', () => {
    loadPrefs();
    renderZone();
    document.getElementById('tz-toggle').addEventListener('click', () => {
      state.utc = !state.utc;
      savePrefs();
      renderZone();
      state.jobCharts = { key: '', charts: [] };
      redrawFleet();
    });
    loadToken();
    renderAuth();
    onRoute();
  });
})();
