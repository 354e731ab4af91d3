// Original file: proto/maka/interaction/v1/interaction.proto

import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface Round {
  'position'?: (number);
  'size'?: (number);
  'deadline'?: (_google_protobuf_Timestamp | null);
}

export interface Round__Output {
  'position': (number);
  'size': (number);
  'deadline': (_google_protobuf_Timestamp__Output | null);
}
