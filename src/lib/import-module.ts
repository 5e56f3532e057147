/**
 * import() of a module outside the code (a package left out of the `npm start` bundle, a script
 * found at run time). In the bundle, scripts/start.mjs passes its own import function as
 * `__mooringImport`: the bundle is compiled through vm.Script with V8's code cache, and on Node 20
 * a script loaded from that cache loses its dynamic-import callback (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING).
 * Run any other way (tsx, the per-file dist/), the name is undeclared and plain import() is used.
 */
declare const __mooringImport: ((specifier: string) => Promise<unknown>) | undefined;

export const importModule = <T>(specifier: string): Promise<T> =>
  (typeof __mooringImport === "function" ? __mooringImport(specifier) : import(specifier)) as Promise<T>;
