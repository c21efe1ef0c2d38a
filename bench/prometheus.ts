/**
 * Histograms read from a Prometheus text endpoint (the Temporal dev server's and the worker SDK's
 * metrics), and what changed between two reads: how many observations, their mean, and the
 * bucket bound under which a given share of them fell.
 */

interface Series {
  buckets: Map<number, number>;
  sum: number;
  count: number;
}

/** Histogram name → label set (without `le`) → its cumulative buckets, sum and count; a counter's value is its count. */
export type Scrape = Map<string, Map<string, Series>>;

const line = /^([a-zA-Z_:][\w:]*)_(bucket|sum|count)(?:\{(.*)\})? ([-+\w.]+)$/;
const counter = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? ([-+\w.]+)$/;

export async function scrape(url: string | null): Promise<Scrape> {
  const result: Scrape = new Map();
  if (!url) return result;
  const text = await fetch(url)
    .then((res) => (res.ok ? res.text() : ''))
    .catch(() => '');
  for (const row of text.split('\n')) {
    if (row.startsWith('#')) continue;
    const c = line.exec(row) ? undefined : counter.exec(row);
    const m = c ? [row, c[1], 'count', c[2], c[3]] : line.exec(row);
    if (!m) continue;
    const [, name, part, labelText = '', raw] = m;
    const labels = new Map([...labelText.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1]!, l[2]!]));
    const le = labels.get('le');
    labels.delete('le');
    const key = [...labels].map(([k, v]) => `${k}=${v}`).join(',');
    const byLabels = result.get(name!) ?? new Map<string, Series>();
    result.set(name!, byLabels);
    const series = byLabels.get(key) ?? { buckets: new Map(), sum: 0, count: 0 };
    byLabels.set(key, series);
    const value = Number(raw);
    if (part === 'bucket' && le !== undefined) series.buckets.set(le === '+Inf' ? Infinity : Number(le), value);
    else if (part === 'sum') series.sum = value;
    else if (part === 'count') series.count = value;
  }
  return result;
}

export interface HistogramChange {
  count: number;
  /** Sum of the observations, in the metric's own unit. */
  sum: number;
  mean: number;
  /** The bucket bound at or under which 90% of the observations fell. */
  p90Bound: number;
}

/**
 * The observations made between two reads of one histogram, over the label sets `match` keeps
 * (summed together): for example one operation of one service.
 */
export function histogramChange(
  before: Scrape,
  after: Scrape,
  name: string,
  match: (labels: string) => boolean,
): HistogramChange {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  for (const [labels, now] of after.get(name) ?? []) {
    if (!match(labels)) continue;
    const then = before.get(name)?.get(labels);
    sum += now.sum - (then?.sum ?? 0);
    count += now.count - (then?.count ?? 0);
    for (const [le, n] of now.buckets) buckets.set(le, (buckets.get(le) ?? 0) + n - (then?.buckets.get(le) ?? 0));
  }
  const bounds = [...buckets].sort((a, b) => a[0] - b[0]);
  const p90Bound = bounds.find(([, n]) => n >= 0.9 * count)?.[0] ?? NaN;
  return { count, sum, mean: count > 0 ? sum / count : NaN, p90Bound };
}

/** The label value of `key` in a label set, for grouping. */
export const labelOf = (labels: string, key: string) => new RegExp(`(?:^|,)${key}=([^,]*)`).exec(labels)?.[1] ?? '';
