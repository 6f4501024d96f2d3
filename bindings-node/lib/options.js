'use strict';
// The option names each method takes, checked before anything crosses.

const { describe, invalid } = require('./errors.js');

// The option names each method takes (issue 53: an unknown key such as
// `{ delya: 5 }` was ignored, and the job enqueued with no delay). A method
// checks its options with opts() before anything else.
const OPEN_OPTIONS = new Set(['clock', 'durability', 'busyTimeout', 'readers', 'maxPayloadBytes', 'watchFallback', 'autoMaintainEvery']);
const QUEUE_OPTIONS = new Set(['lease', 'maxAttempts', 'backoffBase', 'backoffMax', 'backoffJitter']);
const RATE_LIMITER_OPTIONS = new Set(['limit', 'per', 'burst', 'update']);
const TX_OPTIONS = new Set(['tx']);
const READER_OPTIONS = new Set(['wait', 'signal']);
const CHANNEL_RETENTION_OPTIONS = new Set(['maxAge', 'maxCount']);
const ENQUEUE_OPTIONS = new Set(['delay', 'runAt', 'priority', 'maxAttempts', 'dedupeKey', 'expires', 'tx']);
const CLAIM_BATCH_OPTIONS = new Set(['lease', 'wait', 'tx']);
const CLAIM_OPTIONS = new Set(['batch', 'lease', 'signal', 'wait']);
const CANCEL_OPTIONS = new Set(['reason', 'tx']);
const WAIT_RESULT_OPTIONS = new Set(['timeout']);
const DEAD_LETTERS_OPTIONS = new Set(['afterId', 'limit']);
const PURGE_DEAD_OPTIONS = new Set(['olderThan']);
const ACK_OPTIONS = new Set(['result', 'tx']);
const RETRY_OPTIONS = new Set(['delay', 'error', 'tx']);
const HEARTBEAT_OPTIONS = new Set(['extend', 'tx']);
const KEEP_ALIVE_OPTIONS = new Set(['every']);
const PUBLISH_OPTIONS = new Set(['idempotencyKey', 'key', 'tx']);
const PUBLISH_MANY_OPTIONS = new Set(['key', 'tx']);
const READ_OPTIONS = new Set(['after', 'limit']);
const STREAM_RETENTION_OPTIONS = new Set(['maxAge', 'maxCount', 'trimPassed']);
const SUBSCRIBE_OPTIONS = new Set(['start', 'batch', 'autoCommit', 'commitEvery', 'commitInterval', 'wait', 'signal']);
const EVENT_RETRY_OPTIONS = new Set(['delay', 'error']);
const EVENT_HEARTBEAT_OPTIONS = new Set(['extend']);
const GROUP_CREATE_OPTIONS = new Set(['start', 'lease', 'maxDeliveries', 'memberIdle']);
const GROUP_CLAIM_OPTIONS = new Set(['n', 'lease', 'wait']);
const REMOVE_MEMBER_OPTIONS = new Set(['force']);
const RETRY_ERROR_OPTIONS = new Set(['delay']);
const WORKER_OPTIONS = new Set(['concurrency', 'grace', 'scheduler', 'workerId']);
const HANDLE_OPTIONS = new Set(['task', 'concurrency', 'timeout', 'lease']);
const RUN_OPTIONS = new Set(['signal', 'signals']);
const LOCK_TRY_OPTIONS = new Set(['ttl', 'tx']);
const LOCK_ACQUIRE_OPTIONS = new Set(['ttl', 'wait', 'signal']);
const LOCK_RENEW_OPTIONS = new Set(['ttl']);
const LOCK_HOLD_OPTIONS = new Set(['ttl', 'wait', 'every', 'signal']);
const RATE_TRY_OPTIONS = new Set(['cost', 'tx']);
const RATE_ACQUIRE_OPTIONS = new Set(['cost', 'wait', 'signal']);
const PAUSE_OPTIONS = new Set(['note']);
const SCHEDULER_RUN_OPTIONS = new Set(['signal']);

/**
 * A method's options: undefined is none; anything but a plain object, or
 * a key the method does not take, is InvalidArgument (naming the key and
 * the ones it takes) before anything is written.
 */
function opts(options, known) {
  if (options === undefined) return NO_OPTIONS;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw invalid(`options must be an object, got ${describe(options)}`);
  }
  for (const k in options) {
    if (!known.has(k)) {
      throw invalid(`unknown option ${JSON.stringify(k)}; the options here are ${[...known].join(', ')}`);
    }
  }
  return options;
}
const NO_OPTIONS = Object.freeze({});

module.exports = {
  ACK_OPTIONS,
  CANCEL_OPTIONS,
  CHANNEL_RETENTION_OPTIONS,
  CLAIM_BATCH_OPTIONS,
  CLAIM_OPTIONS,
  DEAD_LETTERS_OPTIONS,
  ENQUEUE_OPTIONS,
  EVENT_HEARTBEAT_OPTIONS,
  EVENT_RETRY_OPTIONS,
  GROUP_CLAIM_OPTIONS,
  GROUP_CREATE_OPTIONS,
  HANDLE_OPTIONS,
  HEARTBEAT_OPTIONS,
  KEEP_ALIVE_OPTIONS,
  LOCK_ACQUIRE_OPTIONS,
  LOCK_HOLD_OPTIONS,
  LOCK_RENEW_OPTIONS,
  LOCK_TRY_OPTIONS,
  OPEN_OPTIONS,
  PAUSE_OPTIONS,
  PUBLISH_MANY_OPTIONS,
  PUBLISH_OPTIONS,
  PURGE_DEAD_OPTIONS,
  QUEUE_OPTIONS,
  RATE_ACQUIRE_OPTIONS,
  RATE_LIMITER_OPTIONS,
  RATE_TRY_OPTIONS,
  READER_OPTIONS,
  READ_OPTIONS,
  REMOVE_MEMBER_OPTIONS,
  RETRY_ERROR_OPTIONS,
  RETRY_OPTIONS,
  RUN_OPTIONS,
  SCHEDULER_RUN_OPTIONS,
  STREAM_RETENTION_OPTIONS,
  SUBSCRIBE_OPTIONS,
  TX_OPTIONS,
  WAIT_RESULT_OPTIONS,
  WORKER_OPTIONS,
  opts,
};
