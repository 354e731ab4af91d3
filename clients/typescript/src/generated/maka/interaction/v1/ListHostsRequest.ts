// Original file: proto/maka/interaction/v1/interaction_service.proto


export interface ListHostsRequest {
}

export interface ListHostsRequest__Output {
}
