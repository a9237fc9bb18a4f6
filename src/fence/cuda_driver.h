/* The part of the CUDA driver API's C ABI that the memory fence interposes,
 * written from NVIDIA's driver API reference (cuda.h of CUDA 12/13) so that
 * building needs no CUDA toolkit. Names keep CUDA's spelling so each line can
 * be checked against cuda.h; values and layouts are the stable ABI and must
 * never be "tidied". C-compatible: the fence and the fake driver both use it. */
#ifndef GPUHERD_FENCE_CUDA_DRIVER_H_
#define GPUHERD_FENCE_CUDA_DRIVER_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int CUresult;
enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_FOUND = 500,
};

typedef unsigned long long CUdeviceptr;
typedef unsigned long long cuuint64_t;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef struct CUstream_st* CUstream;
typedef struct CUmemPoolHandle_st* CUmemoryPool;
typedef struct CUarray_st* CUarray;
typedef struct CUmipmappedArray_st* CUmipmappedArray;

/* cuGetProcAddress flags. */
enum { CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM = 1 << 1 };
/* cuGetProcAddress_v2's symbolStatus (an enum in cuda.h: int-sized). */
typedef int CUdriverProcAddressQueryResult;

/* CUmemLocation.type: memory on a device (the others are host memory). */
enum { CU_MEM_LOCATION_TYPE_DEVICE = 0x1 };
typedef struct {
  int type;
  int id;
} CUmemLocation;
/* Only the leading fields are read; the fence never copies or sizes it. */
typedef struct {
  int type;
  int requestedHandleTypes;
  CUmemLocation location;
} CUmemAllocationProp;

/* CUarray_format values whose element size is known; any other format is
 * counted at 4 bytes a channel. */
enum {
  CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
  CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
  CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
  CU_AD_FORMAT_SIGNED_INT8 = 0x08,
  CU_AD_FORMAT_SIGNED_INT16 = 0x09,
  CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
  CU_AD_FORMAT_HALF = 0x10,
  CU_AD_FORMAT_FLOAT = 0x20,
};
typedef struct {
  size_t Width;
  size_t Height;
  int Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
  size_t Width;
  size_t Height;
  size_t Depth;
  int Format;
  unsigned int NumChannels;
  unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* GPUHERD_FENCE_CUDA_DRIVER_H_ */
