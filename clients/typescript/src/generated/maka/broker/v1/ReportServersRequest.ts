// Original file: proto/maka/broker/v1/broker.proto

import type { ServerStatus as _maka_broker_v1_ServerStatus, ServerStatus__Output as _maka_broker_v1_ServerStatus__Output } from '../../../maka/broker/v1/ServerStatus';
import type { Long } from '@grpc/proto-loader';

export interface ReportServersRequest {
  'reporter_id'?: (string);
  'servers'?: (_maka_broker_v1_ServerStatus)[];
  'config_generation'?: (number | string | Long);
  'config_errors'?: (string)[];
  'config_changes'?: (string)[];
}

export interface ReportServersRequest__Output {
  'reporter_id': (string);
  'servers': (_maka_broker_v1_ServerStatus__Output)[];
  'config_generation': (string);
  'config_errors': (string)[];
  'config_changes': (string)[];
}
