#include "cuda/chunk/summary_ahead.cuh"
#include <cstdio>
using namespace gdn::cuda;using namespace chain;typedef __nv_bfloat16 E;typedef float F;
#define L(i,n) for(int i=0;i<n;++i)
__global__ void K(E*a,E*b,F*V,F*o,F*p){extern __shared__ char r[];char*s=r+align_1024_offset(r);uint32_t S=smem_u32(s);
int w=threadIdx.x/32,l=threadIdx.x%32,g=l/4,t=l%4;
for(int i=threadIdx.x;i<8192;i+=128){int q=i/128,c=i%128,f=(c/64)*8192+sw128(q,c%64/8)+c%8*2;*(E*)(s+f)=a[i];*(E*)(s+16384+f)=b[i];}
fence_proxy_async();__syncthreads();F x[32],y[64];uint32_t v[16];
WgTile A=wg_tile(S,16,1024),B=wg_tile(S+16384,16,1024),C=wg_tile(S+32768,16,1024),D=wg_tile(S+40960,16,1024),T=wg_tile(S,8192,1024);
wgmma_fence();L(k,8)wgmma_m64n64_ss<E,0>(x,A.at(k/4*8192+k%4*32),B.at(k/4*8192+k%4*32),k>0);wgmma_commit();wgmma_wait<0>();
stage_hi_lo<E>(x,S+32768,0,0,w,l);
L(k,4)L(q,4){int R=16*w+g+8*(q%2),c=16*k+8*(q/2)+2*t;v[4*k+q]=pack2<E>(V[R*64+c],V[R*64+c+1]);}
stage_rows_x16(S+40960,v,w,l);fence_proxy_async();__syncthreads();L(i,32)x[i]=0;L(i,64)y[i]=1;
wgmma_fence();L(k,4)wgmma_m64n64_rs<E,1>(x,v+4*k,C.at(k*32),1);L(k,4)wgmma_m64n128_ss_tb<E>(y,D.at(k*32),T.at(k*2048));wgmma_commit();wgmma_wait<0>();
L(k,4)L(q,4)L(e,2)o[(16*w+g+8*(q%2))*64+16*k+8*(q/2)+2*t+e]=x[8*k+2*q+e];
for_each_state_elem(16*w+g,t,[&](int i,int k,int u){p[u*128+k]=y[i];});}
int main(){static F k[16384],V[4096],o[4096],p[8192];static E h[16384];F*dV,*dO,*dP;E*dh;cudaMalloc(&dV,16384);cudaMalloc(&dO,16384);cudaMalloc(&dP,32768);cudaMalloc(&dh,32768);
srand(1);L(i,16384)k[i]=__bfloat162float(h[i]=__float2bfloat16((rand()%2001-1000)/500.f));L(i,4096)V[i]=__bfloat162float(__float2bfloat16((rand()%2001-1000)/700.f));
cudaMemcpy(dh,h,32768,cudaMemcpyHostToDevice);cudaMemcpy(dV,V,16384,cudaMemcpyHostToDevice);
cudaFuncSetAttribute(K,cudaFuncAttributeMaxDynamicSharedMemorySize,60000);K<<<1,128,60000>>>(dh,dh+8192,dV,dO,dP);
cudaMemcpy(o,dO,16384,cudaMemcpyDeviceToHost);cudaMemcpy(p,dP,32768,cudaMemcpyDeviceToHost);
printf("%s\n",cudaGetErrorString(cudaDeviceSynchronize()));double e=0,m=0,f=0,n=0;
L(u,64)L(i,64){double z=0;L(j,64){double d=0;L(c,128)d+=k[i*128+c]*k[8192+j*128+c];z+=V[u*64+j]*__bfloat162float(__float2bfloat16((F)d));}e=fmax(e,fabs(z+o[u*64+i]));m=fmax(m,fabs(z));}
L(u,64)L(c,128){double z=0;L(j,64)z+=V[u*64+j]*k[j*128+c];f=fmax(f,fabs(z+1-p[u*128+c]));n=fmax(n,fabs(z));}
printf("corr err %g of %g; update err %g of %g\n",e,m,f,n);}
