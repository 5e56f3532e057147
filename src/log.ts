/** pino JSON logs; readable output when stdout is a terminal. */
import { pino, type Logger } from "pino";

export function createLogger(level: string): Logger {
  const pretty = process.stdout.isTTY && process.env.MOORING_LOG_FORMAT !== "json";
  return pino({
    level,
    base: { pid: process.pid },
    ...(pretty ? { transport: { target: "pino-pretty", options: { colorize: true, translateTime: "SYS:HH:MM:ss.l" } } } : {}),
  });
}
