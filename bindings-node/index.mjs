// ESM entry point: the same objects as the CommonJS one (index.js).
import honker from './index.js';

export const {
  open,
  Database,
  Transaction,
  Queue,
  Job,
  Worker,
  Permanent,
  Retry,
  Snooze,
  ManualClock,
  HonkerError,
  Busy,
  LeaseLost,
  NotFound,
  InvalidArgument,
  SchemaTooNew,
  Closed,
  Timeout,
  RateLimited,
  Unsafe,
  RolledBack,
  SqliteError,
  InternalError,
  fromSqliteError,
  ERROR_CODES,
  ERROR_CLASSES,
  version,
  extensionPath,
} = honker;
export default honker;
