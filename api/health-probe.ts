/** One dependency's health for the health routes (operationId getHealth): up or not, how fast, and why not. */

export interface ComponentHealth {
  ok: boolean;
  latency_ms: number;
  detail: string | null;
}

/** Runs `check`; no answer within `timeoutMs` counts as down, so a hung dependency cannot hang the probe. */
export async function probe(check: () => Promise<unknown>, timeoutMs = 2000): Promise<ComponentHealth> {
  const started = performance.now();
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      check(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return { ok: true, latency_ms: Math.round(performance.now() - started), detail: null };
  } catch (error) {
    return { ok: false, latency_ms: Math.round(performance.now() - started), detail: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}
