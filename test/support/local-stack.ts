/**
 * Commands run as a person runs them in a terminal: `npm start` and the local twins
 * (`npm run oidc:local`, `npm run smtp:local`), each in its own process group, read from their
 * output, and stopped with Ctrl-C (SIGINT to the whole group, as a terminal sends it).
 * test/e2e/local-stack.test.ts and test/e2e/teams-walkthrough.test.ts drive them.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'vitest';
import { projectRoot } from '../../worker/tools.js';

export interface Running {
  child: ChildProcess;
  /** Everything it printed so far, stdout and stderr interleaved. */
  output: () => string;
}

export interface Started extends Running {
  apiUrl: string;
  devKey: string;
}

/**
 * `npm <args>` in the project, in a process group of its own, answered once its stdout shows
 * `ready`; it exiting first, or `timeoutMs` passing, is an error carrying what it printed.
 */
export async function startInGroup(
  args: string[],
  env: NodeJS.ProcessEnv,
  ready: (output: string) => boolean,
  timeoutMs: number,
): Promise<Running> {
  const child = spawn('npm', args, {
    cwd: projectRoot,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const what = `npm ${args.join(' ')}`;
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not come up:\n${output}`)), timeoutMs);
    const check = () => {
      if (ready(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout.on('data', check);
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}:\n${output}`)));
  });
  return { child, output: () => output };
}

/** `npm start` on its embedded defaults, in `dataDir` and on `port`; `env` adds to (or overrides) them. */
export async function npmStart(dataDir: string, port: number, env: NodeJS.ProcessEnv = {}): Promise<Started> {
  const running = await startInGroup(
    ['start'],
    {
      DATA_DIR: dataDir,
      PORT: String(port),
      DATABASE_URL: '',
      TEMPORAL_ADDRESS: '',
      LOG_LEVEL: 'warn',
      ...env,
    },
    (output) => output.includes('Press Ctrl-C to stop.'),
    150_000,
  );
  const output = running.output();
  return {
    ...running,
    apiUrl: /API:\s+(http:\/\/\S+?)\/?\s/.exec(output)![1]!,
    devKey: /Development key:\s+(owk_\w+)/.exec(output)![1]!,
  };
}

/** Ctrl-C: SIGINT to the process group, then its exit, which must be a clean one. */
export async function ctrlC(running: Running): Promise<void> {
  const { child } = running;
  const exited =
    child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve({ code: child.exitCode, signal: child.signalCode })
      : new Promise<{ code: number | null; signal: string | null }>((resolve) =>
          child.once('exit', (code, signal) => resolve({ code, signal })),
        );
  try {
    process.kill(-child.pid!, 'SIGINT');
  } catch (error) {
    // The whole group is gone already (it stopped by itself): what it exited with still counts.
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
  // npm itself may end by the signal; the command below it must have exited cleanly.
  const { code, signal } = await exited;
  expect(code === 0 || signal === 'SIGINT').toBe(true);
  expect(running.output()).not.toMatch(/stop failed/);
}

/** The processes whose command line names `text` (a data folder, a port). */
export function processesUsing(text: string): string[] {
  const out = execFileSync('ps', ['-eo', 'pid,args'], { encoding: 'utf8' });
  return out.split('\n').filter((line) => line.includes(text) && !line.includes('ps -eo'));
}
