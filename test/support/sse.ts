/** A server-sent events reader over real HTTP for the change-feed tests (inject cannot stream). */
import { Agent, fetch, type Response } from 'undici';

export interface SseEvent {
  event: string;
  id: string | undefined;
  data: string;
  retry: number | undefined;
}

export class SseStream {
  /** Comment lines seen (heartbeats). */
  comments = 0;
  private readonly events: SseEvent[] = [];
  private waiting: (() => void) | undefined;
  private ended = false;
  private failure: Error | undefined;
  readonly finished: Promise<void>;

  private constructor(
    readonly response: Response,
    private readonly controller: AbortController,
    private readonly agent: Agent,
  ) {
    this.finished = this.pump();
  }

  /** Opens the stream; a status other than 200 is answered with the response to inspect. */
  static async open(url: string, headers: Record<string, string>): Promise<SseStream> {
    // A connection pool of its own, closed with the stream, so no socket of it outlives the test.
    const agent = new Agent();
    const controller = new AbortController();
    const response = await fetch(url, { headers, signal: controller.signal, dispatcher: agent });
    return new SseStream(response, controller, agent);
  }

  private async pump() {
    if (!this.response.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of this.response.body) {
        buffer += decoder.decode(chunk as Uint8Array, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (!this.controller.signal.aborted) this.failure = error instanceof Error ? error : new Error(String(error));
    } finally {
      this.ended = true;
      this.waiting?.();
    }
  }

  private parse(block: string) {
    const event: SseEvent = { event: 'message', id: undefined, data: '', retry: undefined };
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) {
        this.comments += 1;
        continue;
      }
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'data') data.push(value);
      else if (field === 'event') event.event = value;
      else if (field === 'id') event.id = value;
      else if (field === 'retry') event.retry = Number(value);
    }
    if (data.length === 0) return;
    event.data = data.join('\n');
    this.events.push(event);
    this.waiting?.();
  }

  /** The next event; rejects when the stream ends first. */
  async next(): Promise<SseEvent> {
    for (;;) {
      const event = this.events.shift();
      if (event) return event;
      if (this.failure) throw this.failure;
      if (this.ended) throw new Error('The event stream ended.');
      await new Promise<void>((resolve) => (this.waiting = resolve));
      this.waiting = undefined;
    }
  }

  /** Events until (and with) the first one `done` accepts. */
  async until(done: (event: SseEvent) => boolean): Promise<SseEvent[]> {
    const seen: SseEvent[] = [];
    for (;;) {
      const event = await this.next();
      seen.push(event);
      if (done(event)) return seen;
    }
  }

  /** Every event left once the server ends the stream. */
  async rest(): Promise<SseEvent[]> {
    await this.finished;
    if (this.failure) throw this.failure;
    return this.events.splice(0);
  }

  close() {
    this.controller.abort();
    void this.agent.destroy();
  }
}

/** An event's data, parsed. */
export const dataOf = <T = Record<string, unknown>>(event: SseEvent): T => JSON.parse(event.data) as T;
