/** The context indicator lives with the drivers that report usage (agents/context.ts). */
export * from "../agents/context.js";
