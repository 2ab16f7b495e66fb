// A real `gpucloud up` for the console's browser tests (as tests/conformance/upcluster.py):
// a control plane and an agent with simulated GPUs in a temporary directory, on a free
// loopback port, always stopped. KEEP_CONSOLE_DIR=1 keeps the directory (up.log, the store).
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Polls `ok` until it returns a truthy value or `seconds` pass (then throws, naming `what`). */
export async function waitFor(ok, seconds, what, stepMs = 50) {
  const deadline = Date.now() + seconds * 1000;
  let last;
  while (Date.now() < deadline) {
    try {
      const v = await ok();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`timed out after ${seconds} s waiting for ${what} (last error: ${last})`);
}

export class UpCluster {
  constructor({ gpucloud, gpuctl, workdir, simulate = '4xH100', node = 'console' }) {
    Object.assign(this, { gpucloud, gpuctl, workdir, simulate, node });
  }

  async start() {
    this.tmp = mkdtempSync(join(tmpdir(), 'gpucloud-console-'));
    chmodSync(this.tmp, 0o711);
    this.data = join(this.tmp, 'data');
    this.output = '';
    this.proc = spawn(this.gpucloud, ['up', '--data-dir', this.data, '--listen', '127.0.0.1:0',
      '--simulate', this.simulate, '--node-name', this.node],
    { cwd: this.workdir, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    const keep = (d) => { this.output += d.toString(); };
    this.proc.stdout.on('data', keep);
    this.proc.stderr.on('data', keep);
    const m = await waitFor(() => {
      if (this.proc.exitCode !== null) throw new Error(`gpucloud up exited: ${this.output}`);
      return /control plane at (https:\/\/127\.0\.0\.1:\d+)/.exec(this.output);
    }, 30, 'gpucloud up to listen');
    this.url = m[1];
    this.config = join(this.data, 'admin.config');
    this.token = /^token: (\S+)/m.exec(readFileSync(this.config, 'utf8'))[1];
    await waitFor(() => this.ctl('get', 'nodes').includes(this.node), 30, 'the node to join', 200);
    return this;
  }

  /** gpuctl as the admin; its stdout. */
  ctl(...args) {
    return execFileSync(this.gpuctl, args, { cwd: this.workdir, encoding: 'utf8',
      env: { ...process.env, GPUCLOUD_CONFIG: this.config }, stdio: ['pipe', 'pipe', 'pipe'] });
  }

  /** A tenant: its namespace and user, and a token for it. */
  tenant(user, namespace) {
    this.ctl('create', 'namespace', namespace);
    this.ctl('create', 'user', user, '-n', namespace, '--policy', 'gpucloud:tenant');
    return JSON.parse(this.ctl('create', 'token', '--user', user, '-o', 'json')).status.token;
  }

  /** A job's phase, read as the admin. */
  phase(namespace, name) {
    return JSON.parse(this.ctl('get', 'job', name, '-n', namespace, '-o', 'json')).status?.phase;
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null) {
      const exited = new Promise((r) => this.proc.once('exit', r));
      try {
        process.kill(-this.proc.pid, 'SIGTERM');
      } catch (e) { /* gone */ }
      const timer = setTimeout(() => {
        try { process.kill(-this.proc.pid, 'SIGKILL'); } catch (e) { /* gone */ }
      }, 10000);
      await exited;
      clearTimeout(timer);
    }
    if (this.tmp && !process.env.KEEP_CONSOLE_DIR) rmSync(this.tmp, { recursive: true, force: true });
  }
}
