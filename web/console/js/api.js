// @ts-check
// The REST API as the console uses it: calls with the signed-in token, errors as ApiError
// (a Kubernetes Status' reason and message), and Informers that list once and then follow the
// API's watch (resuming from the last revision after a disconnect; a 410 relists).

export const API = '/apis/gpucloud/v1';

export class ApiError extends Error {
  /** @param {number} status @param {string} reason @param {string} message */
  constructor(status, reason, message) {
    super(message);
    this.status = status;
    this.reason = reason;
  }
}

export class Api {
  /** @param {string} token */
  constructor(token) {
    this.token = token;
  }

  /** @param {Record<string, string>} [extra] */
  headers(extra) {
    return { Authorization: `Bearer ${this.token}`, ...(extra || {}) };
  }

  /**
   * One request; the parsed JSON answer (text when it is not JSON). Non-2xx throws ApiError.
   * @param {string} method @param {string} path
   * @param {{body?: string, contentType?: string, signal?: AbortSignal}} [opts]
   * @returns {Promise<any>}
   */
  async call(method, path, opts = {}) {
    const headers = this.headers(opts.contentType ? { 'Content-Type': opts.contentType } : {});
    const res = await fetch(path, { method, headers, body: opts.body, signal: opts.signal });
    const text = await res.text();
    let body = text;
    try {
      body = JSON.parse(text);
    } catch (e) {
      /* not JSON: logs, metrics */
    }
    if (!res.ok) {
      const status = /** @type {any} */ (body);
      throw new ApiError(res.status, status?.reason || res.statusText,
                         status?.message || `${method} ${path}: ${res.status}`);
    }
    return body;
  }

  /** @param {string} path */
  get(path) { return this.call('GET', path); }

  /**
   * Whether the signed-in identity may take `action` on `resource` (POST authorize), cached.
   * @param {string} action @param {string} resource @returns {Promise<boolean>}
   */
  async can(action, resource) {
    const key = `${action} ${resource}`;
    this.cache = this.cache || new Map();
    if (!this.cache.has(key)) {
      this.cache.set(key, this.call('POST', `${API}/authorize`, {
        body: JSON.stringify({ action, resource }), contentType: 'application/json',
      }).then((d) => Boolean(d.allowed), () => {
        this.cache.delete(key);  // a failed question is asked again next time
        return false;
      }));
    }
    return this.cache.get(key);
  }
}

/** @param {any} o */
export const keyOf = (o) =>
  o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;

/**
 * A collection listed once (in pages, yielding to the page between them) and then followed by
 * watch: `items` is kept current; subscribers hear of changes at most every `batchMs`.
 */
export class Informer {
  /** @param {Api} api @param {string} path @param {{batchMs?: number, pageSize?: number}} [opts] */
  constructor(api, path, opts = {}) {
    this.api = api;
    this.path = path;
    this.batchMs = opts.batchMs ?? 250;
    // 2,000 objects a page: a job is about 2 kB of JSON, so a page parses in about 10 ms, well
    // under the 50 ms of a long task; the server reads each page alone (Store::ListPage), so
    // 15,000 jobs in 8 pages take about as long as in one (docs/benchmarks.md).
    this.pageSize = opts.pageSize ?? 2000;
    /** @type {Map<string, any>} */
    this.items = new Map();
    this.revision = '0';
    this.synced = false;
    this.remaining = 0;  // while the first list is read: objects not yet read (the server's count)
    /** @type {Set<() => void>} */
    this.listeners = new Set();
    this.abort = new AbortController();
    this.pending = false;
    this.changedAt = 0;  // performance.now() of the last change applied
    this.listed = new Promise((resolve) => { this.resolveListed = resolve; });
  }

  /** @param {() => void} fn @returns {() => void} unsubscribe */
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  notify() {
    if (this.pending) return;
    this.pending = true;
    setTimeout(() => {
      this.pending = false;
      for (const fn of this.listeners) fn();
    }, this.batchMs);
  }

  start() {
    this.run().catch(() => {});
    return this;
  }

  stop() { this.abort.abort(); }

  /** One page of the collection: `limit` objects after the continue token `cont` (""). */
  readPage(/** @type {number} */ limit, /** @type {string} */ cont) {
    const sep = this.path.includes('?') ? '&' : '?';
    return this.api.call('GET', `${this.path}${sep}limit=${limit}` +
        `${cont ? `&continue=${encodeURIComponent(cont)}` : ''}`, { signal: this.abort.signal });
  }

  async list() {
    const items = new Map();
    let cont = '';
    let rv = '0';
    do {
      const page = await this.readPage(this.pageSize, cont);
      for (const o of page.items || []) items.set(keyOf(o), o);
      cont = page.metadata?.continue || '';
      // The first list shows each page as it comes; a relist swaps the whole list in at once.
      if (!this.synced) {
        this.items = items;
        this.remaining = Number(page.metadata?.remainingItemCount || 0);
        this.notify();
      }
      if (!rv || rv === '0') rv = page.metadata?.resourceVersion || '0';
      await new Promise((r) => setTimeout(r, 0));  // let the page paint between pages
    } while (cont);
    this.items = items;
    this.remaining = 0;
    this.revision = rv;
    this.synced = true;
    this.changedAt = performance.now();
    this.resolveListed?.(undefined);
    this.notify();
  }

  /**
   * Re-reads the objects for what the watch does not carry (the nodes' utilization samples,
   * which heartbeats bring and the node objects do not): each object the collection holds is
   * replaced by the fresher read; the watch's revision and membership are left to the watch.
   * In pages of `pageSize`, each its own task.
   */
  async refresh(pageSize = this.pageSize) {
    let cont = '';
    do {
      const page = await this.readPage(pageSize, cont);
      for (const o of page.items || []) {
        // Never over a newer object the watch applied meanwhile.
        const held = this.items.get(keyOf(o));
        if (held && Number(o.metadata.resourceVersion) >= Number(held.metadata.resourceVersion)) {
          this.items.set(keyOf(o), o);
        }
      }
      cont = page.metadata?.continue || '';
    } while (cont);
    this.notify();
  }

  async run() {
    let backoff = 250;
    let needList = true;
    while (!this.abort.signal.aborted) {
      try {
        if (needList) await this.list();
        needList = false;
        const started = performance.now();
        needList = await this.follow();
        // A stream that ended at once (a proxy closing it, a server restarting) is not reopened
        // in a tight loop.
        if (performance.now() - started < 1000) {
          await new Promise((r) => setTimeout(r, backoff));
          backoff = Math.min(backoff * 2, 5000);
        } else backoff = 250;
      } catch (e) {
        if (this.abort.signal.aborted) return;
        // Refused (a bad selector, a revoked token, no such collection, not allowed): retrying
        // would not help; the page shows the error.
        if (e instanceof ApiError && [400, 401, 403, 404].includes(e.status)) {
          this.error = e;
          this.notify();
          return;
        }
        await new Promise((r) => setTimeout(r, backoff));
        backoff = Math.min(backoff * 2, 5000);
      }
    }
  }

  /** One watch request, until it ends; true when the revision was compacted (relist). */
  async follow() {
    const sep = this.path.includes('?') ? '&' : '?';
    const url = `${this.path}${sep}watch=true&allowWatchBookmarks=true&timeoutSeconds=240` +
        `&resourceVersion=${this.revision}`;
    const res = await fetch(url, { headers: this.api.headers(), signal: this.abort.signal });
    if (res.status === 410) return true;
    if (!res.ok || !res.body) {
      const body = await res.json().catch(() => ({}));
      throw new ApiError(res.status, body.reason || '', body.message || res.statusText);
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return false;
      buffer += value;
      let from = 0;
      let nl;
      let changed = false;
      while ((nl = buffer.indexOf('\n', from)) >= 0) {
        const line = buffer.slice(from, nl);
        from = nl + 1;
        if (!line.trim()) continue;
        const ev = JSON.parse(line);
        if (ev.type === 'ERROR') {
          if (ev.object?.code === 410) return true;
          throw new ApiError(ev.object?.code || 500, ev.object?.reason || 'WatchError',
            ev.object?.message || 'the watch failed');
        }
        const rv = ev.object?.metadata?.resourceVersion;
        if (rv) this.revision = rv;
        if (ev.type === 'BOOKMARK') continue;
        const key = keyOf(ev.object);
        if (ev.type === 'DELETED') this.items.delete(key);
        else this.items.set(key, ev.object);
        changed = true;
      }
      buffer = buffer.slice(from);
      if (changed) {
        this.changedAt = performance.now();
        this.notify();
      }
    }
  }
}
