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
