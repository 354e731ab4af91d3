// Original file: proto/maka/broker/v1/broker.proto

import type { ServerStatus as _maka_broker_v1_ServerStatus, ServerStatus__Output as _maka_broker_v1_ServerStatus__Output } from '../../../maka/broker/v1/ServerStatus';
import type { ReporterStatus as _maka_broker_v1_ReporterStatus, ReporterStatus__Output as _maka_broker_v1_ReporterStatus__Output } from '../../../maka/broker/v1/ReporterStatus';
import type { CallSummary as _maka_broker_v1_CallSummary, CallSummary__Output as _maka_broker_v1_CallSummary__Output } from '../../../maka/broker/v1/CallSummary';

export interface GetStatusResponse {
  'servers'?: (_maka_broker_v1_ServerStatus)[];
  'reporters'?: (_maka_broker_v1_ReporterStatus)[];
  'live_invocations'?: (number);
  'live_registrations'?: (number);
  'pending_forms'?: (number);
  'recent_calls'?: (_maka_broker_v1_CallSummary)[];
  'host_id'?: (string);
  'takes_new_calls'?: (boolean);
  'draining'?: (boolean);
}

export interface GetStatusResponse__Output {
  'servers': (_maka_broker_v1_ServerStatus__Output)[];
  'reporters': (_maka_broker_v1_ReporterStatus__Output)[];
  'live_invocations': (number);
  'live_registrations': (number);
  'pending_forms': (number);
  'recent_calls': (_maka_broker_v1_CallSummary__Output)[];
  'host_id': (string);
  'takes_new_calls': (boolean);
  'draining': (boolean);
}
