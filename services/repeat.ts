/**
 * Runs `task` now and then every `everyMs` until stopped (the timer keeps no process alive); the
 * stop waits for a run in progress. For the worker's bootstrap, which keeps its standing workflows
 * started whatever happened to Temporal or to a run meanwhile.
 */
export function repeatEvery(
  task: () => Promise<unknown>,
  everyMs: number,
  onError: (error: unknown) => void,
): () => Promise<void> {
  let running: Promise<unknown> = Promise.resolve();
  const run = () => {
    running = task().catch(onError);
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}
