/** `npm start`: the whole service on its embedded defaults. Ctrl-C stops every child process. */
import { readConfig } from './config.js';
import { startStack } from './stack.js';
import { ToolMissingError } from './tools.js';

async function main() {
  const config = readConfig();
  const stack = await startStack(config).catch((error: unknown) => {
    if (error instanceof ToolMissingError) {
      process.stderr.write(`\n${error.message}\n\n`);
      process.exit(1);
    }
    throw error;
  });
  const lines = [
    '',
    'The service is running.',
    stack.apiUrl && `  API:              ${stack.apiUrl}/`,
    stack.docsUrl && `  API docs:         ${stack.docsUrl}   (OpenAPI: ${stack.apiUrl}/openapi.json)`,
    `  Temporal UI:      ${stack.temporalUiUrl ?? (config.temporalAddress ? `(external Temporal at ${config.temporalAddress})` : `(none: the Temporal server on Postgres at ${stack.temporalAddress} has no Web UI)`)}`,
    stack.temporalMetricsUrl && `  Temporal metrics: ${stack.temporalMetricsUrl}`,
    stack.devApiKey
      ? `  Development key:  ${stack.devApiKey}`
      : '  API keys:         npm run --silent admin -- create-workspace --name NAME --plan paid',
    stack.devApiKey &&
      stack.apiUrl &&
      `  Try:              curl -H 'X-API-Key: ${stack.devApiKey}' ${stack.apiUrl}/workspace/`,
    'Press Ctrl-C to stop.',
    '',
  ].filter(Boolean);
  process.stdout.write(lines.join('\n') + '\n');

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stdout.write(
      `\n${signal}: stopping (API drains, worker finishes its tasks, then Temporal and Postgres)...\n`,
    );
    await stack.stop();
    process.stdout.write('Stopped.\n');
    process.exit(0);
  };
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('SIGTERM', () => void stop('SIGTERM'));
}

main().catch((error: unknown) => {
  process.stderr.write(`The service could not start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
