// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface ListHistoryRequest {
  'session_ids'?: (string)[];
  'host_id'?: (string);
  'page_size'?: (number);
  'page_token'?: (string);
}

export interface ListHistoryRequest__Output {
  'session_ids': (string)[];
  'host_id': (string);
  'page_size': (number);
  'page_token': (string);
}
