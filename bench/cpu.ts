/**
 * CPU time of each part of the stack, read from /proc (Linux), so a table can say which part
 * was the limit: the API process (API and worker), Postgres (postmaster and its backends),
 * the Temporal dev server, the load generator itself, and whatever else ran on the machine.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { setPriority } from 'node:os';

const ticksPerSecond = 100; // USER_HZ on every Linux this runs on

interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, and the same of waited-for children, in ticks. */
  own: number;
  children: number;
}

function readStat(pid: number): ProcStat | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name may hold spaces: fields start after its closing parenthesis.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return {
      pid,
      ppid: Number(fields[1]),
      own: Number(fields[11]) + Number(fields[12]),
      children: Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined;
  }
}

function allStats(): ProcStat[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readStat(Number(name)))
    .filter((s): s is ProcStat => s !== undefined);
}

/** CPU seconds of a process and every descendant (living ones, plus the reaped ones' totals). */
function treeSeconds(root: number, stats: ProcStat[]): number {
  const byParent = new Map<number, ProcStat[]>();
  for (const s of stats) byParent.set(s.ppid, [...(byParent.get(s.ppid) ?? []), s]);
  const rootStat = stats.find((s) => s.pid === root);
  if (!rootStat) return 0;
  let ticks = 0;
  const visit = (s: ProcStat) => {
    ticks += s.own + s.children;
    for (const child of byParent.get(s.pid) ?? []) visit(child);
  };
  visit(rootStat);
  return ticks / ticksPerSecond;
}

export type Component = 'api' | 'postgres' | 'temporal' | 'bench' | 'other';

/** Busy CPU seconds of the whole machine (every core), from the first line of /proc/stat. */
function machineBusySeconds(): number {
  try {
    const fields = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal ...: idle and iowait are not busy.
    const total = fields.slice(0, 8).reduce((a, b) => a + b, 0);
    return (total - fields[3]! - fields[4]!) / ticksPerSecond;
  } catch {
    return 0;
  }
}
export type CpuSnapshot = { at: number } & Record<Component, number>;
const components: Component[] = ['api', 'postgres', 'temporal', 'bench', 'other'];

export function cpuSnapshot(pids: Record<Exclude<Component, 'other'>, number | undefined>): CpuSnapshot {
  const stats = existsSync('/proc/self/stat') ? allStats() : [];
  const seconds = (pid: number | undefined) => (pid ? treeSeconds(pid, stats) : 0);
  const postgres = seconds(pids.postgres);
  const temporal = seconds(pids.temporal);
  // The API process's tree includes Postgres and Temporal, which it started: take them out.
  const api = seconds(pids.api) - postgres - temporal;
  // Only the generator's own process: the stack it started is counted above.
  const bench = pids.bench ? (stats.find((s) => s.pid === pids.bench)?.own ?? 0) / ticksPerSecond : 0;
  // Everything else on the machine (another engineer's tests share these cores).
  const other = machineBusySeconds() - api - postgres - temporal - bench;
  return { at: performance.now(), api, postgres, temporal, bench, other };
}

/** Share of one core each part used between two snapshots, in percent. */
export function cpuPercent(from: CpuSnapshot, to: CpuSnapshot): Record<Component, number> {
  const wall = (to.at - from.at) / 1000;
  const pct = (c: Component) => (wall > 0 ? Math.round(((to[c] - from[c]) / wall) * 100) : 0);
  return Object.fromEntries(components.map((c) => [c, pct(c)])) as Record<Component, number>;
}

/**
 * Sets every thread of a process to `nice` (Linux keeps a priority per thread, and setpriority
 * on a pid reaches only the thread of that id); threads started later inherit it. Answers how
 * many threads it set.
 */
export function renice(pid: number | undefined, nice: number): number {
  if (!pid) throw new Error('renice: the process is not running');
  const threads = readdirSync(`/proc/${pid}/task`).map(Number);
  for (const tid of threads) setPriority(tid, nice);
  return threads.length;
}
