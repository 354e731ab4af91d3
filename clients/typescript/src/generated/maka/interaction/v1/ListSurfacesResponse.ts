// Original file: proto/maka/interaction/v1/interaction_service.proto

import type { AttachedSurface as _maka_interaction_v1_AttachedSurface, AttachedSurface__Output as _maka_interaction_v1_AttachedSurface__Output } from '../../../maka/interaction/v1/AttachedSurface';
import type { Timestamp as _google_protobuf_Timestamp, Timestamp__Output as _google_protobuf_Timestamp__Output } from '../../../google/protobuf/Timestamp';

export interface ListSurfacesResponse {
  'surfaces'?: (_maka_interaction_v1_AttachedSurface)[];
  'omitted'?: (number);
  'as_of'?: (_google_protobuf_Timestamp | null);
}

export interface ListSurfacesResponse__Output {
  'surfaces': (_maka_interaction_v1_AttachedSurface__Output)[];
  'omitted': (number);
  'as_of': (_google_protobuf_Timestamp__Output | null);
}
