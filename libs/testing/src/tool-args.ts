import { relative } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';

type ToolArgsConfig = ParseArgsConfig & { readonly options: NonNullable<ParseArgsConfig['options']> };

/** The usage text of a tool: its script and each option with its type and default. */
export function toolUsage(script: string, options: ToolArgsConfig['options']): string {
  const lines = Object.entries(options).map(([name, option]) => {
    const value = option.type === 'string' ? ' VALUE' : '';
    const given = Array.isArray(option.default) ? option.default.length > 0 : option.default !== undefined;
    const fallback = given ? ` (default: ${String(option.default)})` : '';
    return `  --${name}${value}${option.multiple ? ' (repeatable)' : ''}${fallback}`;
  });
  return [`usage: npx tsx ${script} [options]`, ...lines, '  --help'].join('\n');
}

/**
 * `parseArgs` of node:util for the benchmarks and tools: `--help` prints the options and exits 0; an unknown
 * option or a missing value prints one `error:` line with the usage and exits 2, instead of a stack trace.
 */
export function parseToolArgs<T extends ToolArgsConfig>(
  config: T,
  argv: readonly string[] = process.argv.slice(2),
): ReturnType<typeof parseArgs<T>> {
  // The script as the user named it from here (tools/bench/src/x.ts), so the usage line can be pasted.
  const script = process.argv[1] ? relative(process.cwd(), process.argv[1]) : 'tool';
  const withHelp = { ...config, args: [...argv], options: { ...config.options, help: { type: 'boolean' as const } } };
  let parsed: ReturnType<typeof parseArgs<typeof withHelp>>;
  try {
    parsed = parseArgs(withHelp);
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (typeof code !== 'string' || !code.startsWith('ERR_PARSE_ARGS')) throw err;
    process.stderr.write(`error: ${(err as Error).message.split('\n')[0]}\n${toolUsage(script, config.options)}\n`);
    process.exit(2);
  }
  if ((parsed.values as { help?: boolean }).help) {
    process.stdout.write(`${toolUsage(script, config.options)}\n`);
    process.exit(0);
  }
  return parsed as unknown as ReturnType<typeof parseArgs<T>>;
}
