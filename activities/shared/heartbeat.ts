/** A heartbeat every 5 s while in an activity (none when called outside one, as a test may); clear it when done. */
import { Context } from '@temporalio/activity';

export function heartbeating(): NodeJS.Timeout | undefined {
  let context: Context;
  try {
    context = Context.current();
  } catch {
    return undefined;
  }
  return setInterval(() => context.heartbeat(), 5_000);
}

/** Runs `work` with `heartbeating()` around it: an attempt its worker took down with it stops beating, and its heartbeat timeout retries it. */
export async function whileBeating<T>(work: () => Promise<T>): Promise<T> {
  const beat = heartbeating();
  try {
    return await work();
  } finally {
    clearInterval(beat);
  }
}
