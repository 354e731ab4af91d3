// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { Long } from '@grpc/proto-loader';

export interface Hello {
  'begin_new_epoch'?: (boolean);
  'resume_epoch'?: (number | string | Long);
  'watched_interaction_ids'?: (string)[];
  'host_id'?: (string);
  'mode'?: "begin_new_epoch"|"resume_epoch";
}

export interface Hello__Output {
  'begin_new_epoch'?: (boolean);
  'resume_epoch'?: (string);
  'watched_interaction_ids': (string)[];
  'host_id': (string);
  'mode'?: "begin_new_epoch"|"resume_epoch";
}
