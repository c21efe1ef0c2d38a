/**
 * One half of the service (worker or API) as a child process the chaos test can kill and
 * restart. Its output goes to a log file; it is ready when it prints its ready line. An exit
 * nobody asked for is counted and the process is started again. The script is a built bundle
 * (`buildServiceScripts`): a restart loads no TypeScript, as in production.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { buildEntries, buildWorkflowBundle, freshBuildDir } from '../worker/build.js';
import { projectRoot } from '../worker/tools.js';

export interface ServiceScripts {
  api: string;
  worker: string;
  /** For WORKFLOW_BUNDLE. */
  workflowBundle: string;
}

/**
 * The API's and the worker's child scripts, built into a new folder under dist/ (see
 * worker/build.ts), with the workflow bundle unless one is given; `remove` deletes the folder.
 */
export async function buildServiceScripts(
  workflowBundle?: string,
): Promise<{ scripts: ServiceScripts; remove: () => void }> {
  const dir = freshBuildDir('services');
  const remove = () => rmSync(dir, { recursive: true, force: true });
  try {
    const [[api, worker], bundle] = await Promise.all([
      buildEntries(['sim/run-api.ts', 'sim/run-worker.ts'], dir),
      workflowBundle ?? buildWorkflowBundle(join(dir, 'workflows.js')),
    ]);
    return { scripts: { api: api!, worker: worker!, workflowBundle: bundle }, remove };
  } catch (error) {
    remove();
    throw error;
  }
}

export class ServiceProcess {
  starts = 0;
  unexpectedExits = 0;
  /** Each time it was down, from its exit (one nobody asked for, or a restart's) to the new process's ready line (epoch ms). */
  readonly downs: { from: number; to: number }[] = [];
  private child: ChildProcess | null = null;
  private exited: Promise<void> = Promise.resolve();
  private expectingExit = false;
  private stopped = false;
  private readonly out: WriteStream;
  private restarting: Promise<void> | null = null;
  /** Between its ready line and its exit. */
  private answering = false;

  constructor(
    readonly name: string,
    private readonly script: string,
    private readonly env: () => NodeJS.ProcessEnv,
    readonly logFile: string,
    private readonly readyLine: string,
  ) {
    this.out = createWriteStream(logFile, { flags: 'a' });
  }

  get downMs(): number[] {
    return this.downs.map((d) => d.to - d.from);
  }

  /** Whether it is running and has printed its ready line. */
  get up(): boolean {
    return this.answering;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts it and waits for its ready line; retries while it exits early (Temporal restarting). Once stopped, it starts nothing. */
  async start(): Promise<void> {
    for (let attempt = 1; !this.stopped; attempt += 1) {
      try {
        await this.startOnce();
        return;
      } catch (error) {
        if (this.stopped) return;
        if (attempt >= 30) throw error;
        await sleep(Math.min(500 * attempt, 3000));
      }
    }
  }

  private startOnce(): Promise<void> {
    this.starts += 1;
    this.out.write(`\n--- start ${this.starts} at ${new Date().toISOString()}\n`);
    // Its own process group: a Ctrl-C in the terminal reaches the chaos run, which stops it in order.
    const child = spawn(process.execPath, ['--enable-source-maps', this.script], {
      cwd: projectRoot,
      env: this.env(),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
    this.child = child;
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.stderr.pipe(this.out, { end: false });
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      let seen = '';
      const timer = setTimeout(() => {
        if (!ready) {
          child.kill('SIGKILL');
          reject(new Error(`${this.name} printed no "${this.readyLine}" within 60 s`));
        }
      }, 60_000);
      child.stdout.on('data', (chunk: Buffer) => {
        this.out.write(chunk);
        if (ready) return;
        seen = (seen + chunk.toString()).slice(-1000);
        if (seen.includes(this.readyLine)) {
          ready = true;
          this.answering = true;
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        this.answering = false;
        this.out.write(`--- exit code ${code} signal ${signal} at ${new Date().toISOString()}\n`);
        if (!ready) {
          reject(new Error(`${this.name} exited before it was ready (code ${code}, signal ${signal})`));
          return;
        }
        if (this.expectingExit || this.stopped) return;
        // Nobody asked it to go: count it and bring it back.
        this.unexpectedExits += 1;
        const exitedAt = Date.now();
        this.restarting = this.start().then(
          () => void this.downs.push({ from: exitedAt, to: Date.now() }),
          () => undefined,
        );
      });
    });
  }

  /** Kills it with `signal` and waits for the exit; one that takes longer than `graceMs` gets SIGKILL. */
  async kill(signal: NodeJS.Signals, graceMs = 60_000): Promise<void> {
    // A restart after an exit nobody asked for finishes first, unless the process is being stopped.
    if (!this.stopped) await this.restarting;
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    this.expectingExit = true;
    child.kill(signal);
    const gone = await Promise.race([this.exited.then(() => true), sleep(graceMs).then(() => false)]);
    if (!gone) {
      child.kill('SIGKILL');
      await this.exited;
    }
    this.expectingExit = false;
  }

  async restart(signal: NodeJS.Signals, graceMs?: number): Promise<void> {
    await this.kill(signal, graceMs);
    const from = Date.now();
    await this.start();
    this.downs.push({ from, to: Date.now() });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.kill('SIGTERM');
    // A start under way gives up once its child is gone; kill whatever it spawned meanwhile.
    await this.restarting;
    await this.kill('SIGTERM');
    this.out.end();
  }
}

type Down = { from: number; to: number };

/** When all of several processes were down at once (for replicas, the only real outage). */
export function allDown(lists: readonly (readonly Down[])[]): Down[] {
  const both = (a: readonly Down[], b: readonly Down[]) =>
    a
      .flatMap((x) => b.map((y) => ({ from: Math.max(x.from, y.from), to: Math.min(x.to, y.to) })))
      .filter((d) => d.to > d.from);
  return lists.length
    ? lists
        .slice(1)
        .reduce<Down[]>((acc, list) => both(acc, list), [...lists[0]!])
        .sort((x, y) => x.from - y.from)
    : [];
}
