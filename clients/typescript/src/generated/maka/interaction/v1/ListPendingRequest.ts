// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface ListPendingRequest {
  'session_ids'?: (string)[];
  'host_id'?: (string);
}

export interface ListPendingRequest__Output {
  'session_ids': (string)[];
  'host_id': (string);
}
