/* The loopback HTTP/1.1 server of bench/http_throughput.py (`--server c`): every POST is
 * answered with one fixed JSON body a fixed latency after its head was read, never
 * sooner; `GET /stamps` answers at once with when the first request since the last
 * asking arrived, when the last answer left, and how long the server held a request
 * (median, mean, 99th percentile), then resets them.
 *
 * Why C: on a 2-core machine the server shares the cores with the client it measures.
 * The asyncio servers of http_throughput.py spend 0.08-0.11 ms of CPU per request and
 * wake up to 1 ms late (epoll's millisecond timeouts); this one spends ~0.05 ms, most of
 * it the kernel's loopback TCP, and a timerfd wakes it at the deadline, so more of what
 * is measured is the client.
 *
 *     cc -O2 -o latency_server bench/latency_server.c
 *     ./latency_server PORT LATENCY_MS ANSWER_JSON
 *
 * One thread, epoll, one FIFO of deadlines: every request waits the same latency, so
 * deadlines fall in arrival order. Linux only. Not part of the test run. */

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_FD 65536

struct connection {
    char *buffer;          /* bytes read and not yet parsed */
    size_t length, capacity;
    unsigned generation;   /* bumped when the descriptor is closed: stale deadlines skip it */
    int open;
};

struct deadline {
    double due, arrived;   /* CLOCK_MONOTONIC seconds */
    int fd;
    unsigned generation;
};

static struct connection connections[MAX_FD];
static struct deadline *fifo;
static size_t fifo_head, fifo_tail, fifo_capacity;
static double *held;
static size_t held_count, held_capacity;
static double first_stamp = -1, last_stamp = -1;
static char *answer;
static size_t answer_length;

static double now(clockid_t clock) {
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void *grow(void *memory, size_t *capacity, size_t need, size_t item) {
    if (need <= *capacity) return memory;
    size_t wanted = *capacity ? *capacity : 1024;
    while (wanted < need) wanted *= 2;
    void *bigger = realloc(memory, wanted * item);
    if (!bigger) { perror("realloc"); exit(1); }
    *capacity = wanted;
    return bigger;
}

static void push_deadline(struct deadline d) {
    if (fifo_tail == fifo_capacity && fifo_head > 0) {  /* slide down before growing */
        memmove(fifo, fifo + fifo_head, (fifo_tail - fifo_head) * sizeof *fifo);
        fifo_tail -= fifo_head;
        fifo_head = 0;
    }
    fifo = grow(fifo, &fifo_capacity, fifo_tail + 1, sizeof *fifo);
    fifo[fifo_tail++] = d;
}

static void arm(int timer) {
    struct itimerspec when = {0};
    if (fifo_head < fifo_tail) {
        double due = fifo[fifo_head].due;
        when.it_value.tv_sec = (time_t)due;
        when.it_value.tv_nsec = (long)((due - (double)(time_t)due) * 1e9);
        if (when.it_value.tv_sec == 0 && when.it_value.tv_nsec == 0) when.it_value.tv_nsec = 1;
    }
    timerfd_settime(timer, TFD_TIMER_ABSTIME, &when, NULL);
}

static void close_connection(int epoll, int fd) {
    epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    connections[fd].open = 0;
    connections[fd].length = 0;
    connections[fd].generation++;
}

static int send_all(int fd, const char *bytes, size_t length) {
    /* answers are a few hundred bytes and loopback buffers hold far more: a short write
     * means the client stopped reading, and the connection is dropped */
    ssize_t sent = write(fd, bytes, length);
    return sent == (ssize_t)length ? 0 : -1;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int stamps_response(char *out, size_t size) {
    char body[512], first[64] = "null", last[64] = "null";
    char median[64] = "null", mean[64] = "null", p99[64] = "null";
    if (first_stamp >= 0) snprintf(first, sizeof first, "%.6f", first_stamp);
    if (last_stamp >= 0) snprintf(last, sizeof last, "%.6f", last_stamp);
    if (held_count) {
        double total = 0;
        qsort(held, held_count, sizeof *held, by_value);
        for (size_t i = 0; i < held_count; i++) total += held[i];
        snprintf(median, sizeof median, "%.4f", 1000 * held[held_count / 2]);
        snprintf(mean, sizeof mean, "%.4f", 1000 * total / (double)held_count);
        snprintf(p99, sizeof p99, "%.4f", 1000 * held[(size_t)((double)held_count * 0.99)]);
    }
    int body_length = snprintf(body, sizeof body,
        "{\"first\": %s, \"last\": %s, \"held_median_ms\": %s, \"held_mean_ms\": %s, "
        "\"held_p99_ms\": %s}", first, last, median, mean, p99);
    first_stamp = last_stamp = -1;
    held_count = 0;
    return snprintf(out, size, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    "Content-Length: %d\r\n\r\n%s", body_length, body);
}

/* The complete requests at the start of the connection's buffer: each POST queued for its
 * answer, a stamps request answered now. -1: the connection is to be closed. */
static int take_requests(int fd, double latency) {
    struct connection *c = &connections[fd];
    size_t start = 0;
    for (;;) {
        char *base = c->buffer + start;
        size_t left = c->length - start;
        char *end = memmem(base, left, "\r\n\r\n", 4);
        if (!end) break;
        size_t head = (size_t)(end - base) + 4, body = 0;
        for (char *line = memmem(base, head, "\r\n", 2); line && line < end;
             line = memmem(line + 2, head - (size_t)(line + 2 - base), "\r\n", 2)) {
            if (strncasecmp(line + 2, "content-length:", 15) == 0) {
                body = strtoul(line + 17, NULL, 10);
                break;
            }
        }
        if (left < head + body) break;
        double arrived = now(CLOCK_MONOTONIC);
        if (left >= 12 && memcmp(base, "GET /stamps ", 12) == 0) {
            char out[1024];
            int n = stamps_response(out, sizeof out);
            if (send_all(fd, out, (size_t)n) < 0) return -1;
        } else {
            if (first_stamp < 0) first_stamp = now(CLOCK_REALTIME);
            push_deadline((struct deadline){arrived + latency, arrived, fd, c->generation});
        }
        start += head + body;
    }
    memmove(c->buffer, c->buffer + start, c->length - start);
    c->length -= start;
    return 0;
}

static void answer_due(int epoll) {
    double at = now(CLOCK_MONOTONIC);
    while (fifo_head < fifo_tail && fifo[fifo_head].due <= at) {
        struct deadline d = fifo[fifo_head++];
        struct connection *c = &connections[d.fd];
        if (!c->open || c->generation != d.generation) continue;
        if (send_all(d.fd, answer, answer_length) < 0) {
            close_connection(epoll, d.fd);
            continue;
        }
        double sent = now(CLOCK_MONOTONIC);
        last_stamp = now(CLOCK_REALTIME);
        held = grow(held, &held_capacity, held_count + 1, sizeof *held);
        held[held_count++] = sent - d.arrived;
    }
    if (fifo_head == fifo_tail) fifo_head = fifo_tail = 0;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT LATENCY_MS ANSWER_JSON\n", argv[0]);
        return 2;
    }
    int port = atoi(argv[1]);
    double latency = atof(argv[2]) / 1000;
    answer_length = strlen(argv[3]) + 128;
    answer = malloc(answer_length);
    answer_length = (size_t)snprintf(answer, answer_length,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
        strlen(argv[3]), argv[3]);

    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0 ||
        listen(listener, 1024) < 0) {
        perror("bind/listen");
        return 1;
    }
    int epoll = epoll_create1(0);
    int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(epoll, EPOLL_CTL_ADD, listener, &event);
    event.data.fd = timer;
    epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &event);

    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(epoll, ready, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        for (int i = 0; i < n; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= MAX_FD) { close(client); continue; }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
                    connections[client].open = 1;
                    connections[client].length = 0;
                    event.data.fd = client;
                    epoll_ctl(epoll, EPOLL_CTL_ADD, client, &event);
                }
            } else if (fd == timer) {
                uint64_t expirations;
                (void)!read(timer, &expirations, sizeof expirations);
                answer_due(epoll);
            } else {
                struct connection *c = &connections[fd];
                c->buffer = grow(c->buffer, &c->capacity, c->length + 65536, 1);
                ssize_t got = read(fd, c->buffer + c->length, c->capacity - c->length);
                if (got <= 0) {
                    if (got < 0 && errno == EAGAIN) continue;
                    close_connection(epoll, fd);
                    continue;
                }
                c->length += (size_t)got;
                if (take_requests(fd, latency) < 0) close_connection(epoll, fd);
            }
        }
        answer_due(epoll);
        arm(timer);
    }
}
