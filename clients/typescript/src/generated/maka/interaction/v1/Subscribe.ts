// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface Subscribe {
  'session_ids'?: (string)[];
  'resume_token'?: (string);
  'host_id'?: (string);
  'surface_kind'?: (string);
}

export interface Subscribe__Output {
  'session_ids': (string)[];
  'resume_token': (string);
  'host_id': (string);
  'surface_kind': (string);
}
