// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface ListHostsResponse {
  'host_ids'?: (string)[];
}

export interface ListHostsResponse__Output {
  'host_ids': (string)[];
}
