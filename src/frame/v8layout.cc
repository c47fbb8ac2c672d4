// custom_labels_v8_layout, the symbol the companion exports for readers:
// the layout they walk (v8layout.h), for the Node major the companion was
// built for.
#include "frame.h"
#include "v8layout.h"

extern "C" {
const cl_v8_layout_t custom_labels_v8_layout = {1,
                                                sizeof(cl_v8_layout_t),
                                                cl_frame::layout::kTaggedSize,
                                                cl_frame::layout::kJSMapTableOffset,
                                                cl_frame::layout::kOrderedHashMapHeaderSize,
                                                cl_frame::layout::kOrderedHashMapEntrySize,
                                                cl_frame::layout::kField0,
                                                cl_frame::layout::kField0,
                                                cl_frame::kRecordSet,
                                                cl_frame::kRecordToken,
                                                cl_frame::kToken};
}
