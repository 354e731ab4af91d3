// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Long } from '@grpc/proto-loader';

export interface EpochBegun {
  'host_epoch'?: (number | string | Long);
  'closed_count'?: (number);
}

export interface EpochBegun__Output {
  'host_epoch': (string);
  'closed_count': (number);
}
